"""Write the golden TensorFlow checkpoints that tests/test_tf_checkpoint.py reads without TensorFlow,
with real TensorFlow running google-research/bert's own code (the bert-tensorflow 1.0.4 package of
the test extra: modeling.py, run_pretraining.py's heads, run_classifier.py's create_model and
optimization.py's AdamWeightDecayOptimizer), and dump what TensorFlow reads back from them.

    pip install tensorflow-cpu        # 2.21.0 wrote the committed files; not a bertlab dependency
    python data/tf_checkpoints/make_golden.py

Writes, next to this script (every weight random, drawn from fixed seeds):

    uncased_L-2_H-16_A-4/          a pretraining checkpoint as google releases them: bert_config.json,
                                   vocab.txt, bert_model.ckpt.{index,data-00000-of-00001}, saved with
                                   the adam_m/adam_v slots and global_step of two training steps
    uncased_L-2_H-16_A-4_sharded/  the same weights (no optimizer slots) saved by a sharded Saver
                                   from two devices: bert_model.ckpt.data-0000{0,1}-of-00002
    run_classifier_output/         a run_classifier-style fine-tuned checkpoint (3 labels, two steps
                                   from the pretraining one): `checkpoint`, model.ckpt-2.*, and the
                                   bert_config.json/vocab.txt a user copies beside it
    tensors_pretraining.npz, tensors_classifier.npz
                                   every variable of the two checkpoints as tf.train.load_checkpoint
                                   reads it (the sharded one is checked equal to the first here)
    outputs.npz                    three sentence pairs tokenised by google's FullTokenizer and what
                                   google's model computes on them in TensorFlow

Two pieces of google's code need TF 1.x APIs that TF 2.x no longer has; they are replaced by
the same computation under the same variable names: tf.contrib.layers.layer_norm (LayerNorm/beta,
LayerNorm/gamma, epsilon 1e-12) and tf.layers.dense (dense/kernel, dense/bias). The outputs use
the exact erf GELU, as HF's and bertlab's "gelu" do; bert-tensorflow 1.0.4's modeling.py has the
tanh approximation, which the script also runs to print how far the two are apart.
"""
import json
import math
import os
import shutil
import sys
import types

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_v2_behavior()  # graphs, sessions and TF 1.x shapes, as google's code was written for
HERE = os.path.dirname(os.path.abspath(__file__))
PRETRAINED, SHARDED, CLASSIFIER = (os.path.join(HERE, name) for name in
                                   ("uncased_L-2_H-16_A-4", "uncased_L-2_H-16_A-4_sharded", "run_classifier_output"))
CONFIG = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 16,
          "initializer_range": 0.02, "intermediate_size": 37, "max_position_embeddings": 32, "num_attention_heads": 4,
          "num_hidden_layers": 2, "type_vocab_size": 2, "vocab_size": None}
VOCAB = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", "!", "'", "-"] + """
the a an cat dog sat on mat it was is are in park sun out who wrote notes nobody knows warm cold run walk
read write book books tree river house old new big small red blue green and or but not we they she he
you i this that there here day night rain snow ##s ##ed ##ing ##ning ##ly ##er ##est un ##able re
morning evening garden road car train bird fish water milk bread time year
""".split()
PAIRS = [("The cat sat on the mat.", "It was warm."),
         ("Dogs are running in the park!", "The sun is out."),
         ("Who wrote these notes?", "Nobody knows.")]
SEQ, NUM_LABELS, SEED = 20, 3, 20240517


def layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    """tf.contrib.layers.layer_norm as modeling.layer_norm calls it."""
    with v1.variable_scope(scope, default_name="LayerNorm"):
        size = inputs.shape[-1]
        beta = v1.get_variable("beta", [size], initializer=v1.zeros_initializer())
        gamma = v1.get_variable("gamma", [size], initializer=v1.ones_initializer())
        mean, variance = tf.nn.moments(inputs, [-1], keepdims=True)
        return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, 1e-12)


def dense(inputs, units, activation=None, kernel_initializer=None, name=None):
    """tf.layers.dense as the pooler and run_pretraining's masked-LM transform call it."""
    with v1.variable_scope(name, default_name="dense"):
        kernel = v1.get_variable("kernel", [inputs.shape[-1], units], initializer=kernel_initializer)
        bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
        out = tf.matmul(inputs, kernel) + bias
        return activation(out) if activation else out


def erf_gelu(x):
    return x * 0.5 * (1.0 + tf.math.erf(x / math.sqrt(2.0)))


class CompatV1:
    """tf.compat.v1 with tf.layers.dense, for the modules that call it."""
    layers = types.SimpleNamespace(dense=dense)

    def __getattr__(self, name):
        return getattr(v1, name)


def import_google_bert():
    """google's modules, with the two TF 1.x pieces above put where they look for them."""
    contrib = types.ModuleType("tensorflow.contrib")
    contrib.layers = types.SimpleNamespace(layer_norm=layer_norm)
    sys.modules["tensorflow.contrib"] = contrib
    from bert import modeling, optimization, tokenization
    flags = v1.flags.FLAGS
    before = set(flags)
    from bert import run_pretraining
    for name in set(flags) - before:  # run_classifier defines flags of the same names again
        delattr(flags, name)
    from bert import run_classifier
    flags.mark_as_parsed()  # their defaults (tokenization reads preserve_unused_tokens)
    modeling.tf = run_pretraining.tf = CompatV1()
    return modeling, optimization, run_pretraining, run_classifier, tokenization


modeling, optimization, run_pretraining, run_classifier, tokenization = import_google_bert()
tanh_gelu = modeling.gelu  # bert-tensorflow 1.0.4's own


def write_folder(folder):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in VOCAB))
    with open(os.path.join(folder, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump({**CONFIG, "vocab_size": len(VOCAB)}, f, indent=2, sort_keys=True)
        f.write("\n")


def encode_pairs(vocab_file):
    """(input_ids, input_mask, segment_ids) of PAIRS, padded to SEQ, the way run_classifier does it."""
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    rows = []
    for a, b in PAIRS:
        tokens_a, tokens_b = tokenizer.tokenize(a), tokenizer.tokenize(b)
        tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
        segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        ids = tokenizer.convert_tokens_to_ids(tokens)
        pad = SEQ - len(ids)
        rows.append((ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad))
    return [np.array(column, dtype=np.int32) for column in zip(*rows)]


def inputs(batch):
    return (v1.placeholder(tf.int32, [batch, SEQ]), v1.placeholder(tf.int32, [batch, SEQ]),
            v1.placeholder(tf.int32, [batch, SEQ]))


def pretraining_heads(config, model, positions):
    """run_pretraining's two heads and their summed loss, with their labels' placeholders."""
    batch, count = positions.shape
    mlm_ids, mlm_weights = v1.placeholder(tf.int32, [batch, count]), tf.ones([batch, count])
    nsp_labels = v1.placeholder(tf.int32, [batch])
    mlm_loss, _, mlm_log_probs = run_pretraining.get_masked_lm_output(
        config, model.get_sequence_output(), model.get_embedding_table(), positions, mlm_ids, mlm_weights)
    nsp_loss, _, nsp_log_probs = run_pretraining.get_next_sentence_output(config, model.get_pooled_output(), nsp_labels)
    return mlm_loss + nsp_loss, mlm_log_probs, nsp_log_probs, (mlm_ids, nsp_labels)


def perturb(session, variables, rng, scale=0.1):
    """Move every weight off its initial value, so that a bias left at zero or a LayerNorm gain
    left at one would show in the tests."""
    for v in variables:
        value = session.run(v)
        session.run(v.assign(value + rng.normal(0, scale, value.shape).astype(value.dtype)))


def train_two_steps(session, train_op, feeds, rng):
    """Two optimizer steps on random batches; `feeds` holds (placeholder, bound of its values)."""
    for _ in range(2):
        session.run(train_op, {p: rng.integers(0, bound, p.shape.as_list()) for p, bound in feeds})


def write_pretraining(config, rng):
    write_folder(PRETRAINED)
    with tf.Graph().as_default():
        v1.set_random_seed(SEED)
        ids, mask, types_ = inputs(4)
        model = modeling.BertModel(config, is_training=True, input_ids=ids, input_mask=mask, token_type_ids=types_)
        positions = v1.placeholder(tf.int32, [4, 3])
        loss, _, _, (mlm_ids, nsp_labels) = pretraining_heads(config, model, positions)
        train_op = optimization.create_optimizer(loss, 1e-3, 10, 1, use_tpu=False)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            n = config.vocab_size
            train_two_steps(session, train_op, [(ids, n), (mask, 2), (types_, 2), (positions, SEQ), (mlm_ids, n),
                                                (nsp_labels, 2)], rng)
            perturb(session, v1.trainable_variables(), rng)
            v1.train.Saver().save(session, os.path.join(PRETRAINED, "bert_model.ckpt"), write_meta_graph=False,
                                  write_state=False)  # google's folders have no `checkpoint` file


def on_two_devices(op):
    """The encoder's variables on a second CPU device, everything else on the first: a sharded
    Saver writes one data file per device."""
    return "/cpu:1" if "encoder" in op.name else "/cpu:0"


def pretraining_outputs(config, features, save_sharded=False):
    """google's model in inference mode restored from the pretraining checkpoint; `save_sharded`
    saves it again, sharded across two devices."""
    with tf.Graph().as_default(), v1.device(on_two_devices):
        ids, mask, types_ = inputs(len(PAIRS))
        model = modeling.BertModel(config, is_training=False, input_ids=ids, input_mask=mask, token_type_ids=types_)
        positions = tf.constant(np.tile(np.arange(SEQ, dtype=np.int32), (len(PAIRS), 1)))
        _, mlm_log_probs, nsp_log_probs, (mlm_ids, nsp_labels) = pretraining_heads(config, model, positions)
        with v1.Session(config=v1.ConfigProto(device_count={"CPU": 2})) as session:
            v1.train.Saver().restore(session, os.path.join(PRETRAINED, "bert_model.ckpt"))
            feed = {ids: features[0], mask: features[1], types_: features[2],
                    mlm_ids: np.zeros((len(PAIRS), SEQ), np.int32), nsp_labels: np.zeros(len(PAIRS), np.int32)}
            out = session.run({"sequence_output": model.get_sequence_output(), "pooled_output": model.get_pooled_output(),
                               "mlm_log_probs": mlm_log_probs, "nsp_log_probs": nsp_log_probs}, feed)
            if save_sharded:
                write_folder(SHARDED)
                v1.train.Saver(sharded=True).save(session, os.path.join(SHARDED, "bert_model.ckpt"),
                                                  write_meta_graph=False, write_state=False)
    out["mlm_log_probs"] = out["mlm_log_probs"].reshape(len(PAIRS), SEQ, -1)
    return out


def classifier_model(config, is_training, batch):
    ids, mask, types_ = inputs(batch)
    labels = v1.placeholder(tf.int32, [batch])
    loss, _, logits, _ = run_classifier.create_model(config, is_training, ids, mask, types_, labels, NUM_LABELS, False)
    return (ids, mask, types_, labels), loss, logits


def write_classifier(config, rng):
    """run_classifier's model_fn in training: the encoder from the pretraining checkpoint by
    google's assignment map, a new output layer, two AdamWeightDecay steps, saved as the Estimator
    saves: model.ckpt-STEP and a `checkpoint` file naming it by its absolute path, here this
    machine's, which a folder copied elsewhere keeps."""
    write_folder(CLASSIFIER)
    with tf.Graph().as_default():
        v1.set_random_seed(SEED + 1)
        feeds, loss, _ = classifier_model(config, True, 4)
        init = os.path.join(PRETRAINED, "bert_model.ckpt")
        assignment_map, _ = modeling.get_assignment_map_from_checkpoint(v1.trainable_variables(), init)
        v1.train.init_from_checkpoint(init, assignment_map)
        train_op = optimization.create_optimizer(loss, 1e-3, 10, 1, use_tpu=False)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            train_two_steps(session, train_op, list(zip(feeds, (config.vocab_size, 2, 2, NUM_LABELS))), rng)
            perturb(session, [v for v in v1.trainable_variables() if v.name.startswith("output_")], rng)
            v1.train.Saver().save(session, os.path.join(CLASSIFIER, "model.ckpt"), global_step=2,
                                  write_meta_graph=False)
    # the `checkpoint` file names the checkpoint relative to its folder, not by this machine's path
    v1.train.update_checkpoint_state(CLASSIFIER, "model.ckpt-2", all_model_checkpoint_paths=["model.ckpt-2"])


def classifier_logits(config, features):
    with tf.Graph().as_default():
        feeds, _, logits = classifier_model(config, False, len(PAIRS))
        with v1.Session() as session:
            v1.train.Saver().restore(session, v1.train.latest_checkpoint(CLASSIFIER))
            return session.run(logits, dict(zip(feeds[:3], features)))


def read_back(prefix) -> dict:
    """Every variable of a checkpoint as TensorFlow reads it."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in sorted(reader.get_variable_to_shape_map())}


def main():
    rng = np.random.default_rng(SEED)
    config = modeling.BertConfig.from_dict({**CONFIG, "vocab_size": len(VOCAB)})
    write_pretraining(config, rng)
    features = encode_pairs(os.path.join(PRETRAINED, "vocab.txt"))
    modeling.gelu = erf_gelu
    outputs = pretraining_outputs(config, features, save_sharded=True)
    write_classifier(config, rng)
    outputs["classifier_logits"] = classifier_logits(config, features)
    modeling.gelu = tanh_gelu
    tanh = pretraining_outputs(config, features)
    print("google's tanh GELU against the exact one: sequence output differs by up to "
          f"{np.abs(tanh['sequence_output'] - outputs['sequence_output']).max():.2e}")

    pretrained = read_back(os.path.join(PRETRAINED, "bert_model.ckpt"))
    sharded = read_back(os.path.join(SHARDED, "bert_model.ckpt"))
    data_files = sorted(f for f in os.listdir(SHARDED) if ".data-" in f)
    assert data_files == ["bert_model.ckpt.data-00000-of-00002", "bert_model.ckpt.data-00001-of-00002"], data_files
    assert sharded.keys() == {k for k in pretrained if "adam" not in k and k != "global_step"}, sharded.keys()
    assert all(np.array_equal(sharded[k], pretrained[k]) for k in sharded)
    np.savez_compressed(os.path.join(HERE, "tensors_pretraining.npz"), **pretrained)
    np.savez_compressed(os.path.join(HERE, "tensors_classifier.npz"), **read_back(v1.train.latest_checkpoint(CLASSIFIER)))
    names = ("input_ids", "input_mask", "segment_ids")
    np.savez(os.path.join(HERE, "outputs.npz"), **dict(zip(names, features)), **outputs,
             sentences=np.array([" ||| ".join(pair) for pair in PAIRS]))
    print(f"wrote {len(pretrained)} + {len(sharded)} tensors and three checkpoints under {HERE} "
          f"with TensorFlow {tf.__version__}")


if __name__ == "__main__":
    main()
