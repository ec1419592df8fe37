"""SQuAD: reading, run_squad's windows and answer positions, span post-processing, EM/F1, and a
tiny BERT that learns eight questions."""
import json
import sys
import types
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertlab.finetune.squad import (NO_TARGET, QuestionAnsweringTask, SquadExample, answer_token_span,
                                    featurize_squad, read_squad, unfound_answer_ids)
from bertlab.finetune.squad_metrics import exact_match, f1_score, normalize_answer, squad_evaluate
from bertlab.inference.qa import QaSettings, answer_questions
from bertlab.models.bert_config import BertConfig
from bertlab.tokenization.bert_tokenizer import BertTokenizer

WORDS = ("zero one two three four five six seven eight nine where is what who sat the cat on mat dog ran "
         "in park cafe muller paris opened bird sang tree fish swam sea cow ate grass fox hid den owl "
         "slept barn bee flew hive , . ? ##s").split()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n", encoding="utf-8")
    return BertTokenizer(str(vocab))


TEN = "zero one two three four five six seven eight nine"  # ten one-token words


def _example(answer: str | None, context: str = TEN, qas_id: str = "q") -> SquadExample:
    if answer is None:
        return SquadExample(qas_id, "what", context, [], is_impossible=True)
    return SquadExample(qas_id, "what", context, [(answer, context.index(answer))])


def _tokens(tokenizer, feature):
    return tokenizer.convert_ids_to_tokens(feature["input_ids"])


# --- windows, max context, answer positions ----------------------------------------------------------
def test_windows_and_max_context_on_a_small_document(tokenizer):
    # question "what": 1 token; max_seq_length 8 -> 4 context tokens per window; stride 3 -> starts 0, 3, 6
    features = featurize_squad([_example("one")], tokenizer, max_seq_length=8, doc_stride=3)
    assert [_tokens(tokenizer, f) for f in features] == [
        ["[CLS]", "what", "[SEP]", "zero", "one", "two", "three", "[SEP]"],
        ["[CLS]", "what", "[SEP]", "three", "four", "five", "six", "[SEP]"],
        ["[CLS]", "what", "[SEP]", "six", "seven", "eight", "nine", "[SEP]"]]
    assert features[1]["token_type_ids"] == [0, 0, 0, 1, 1, 1, 1, 1]
    assert [f["example_index"] for f in features] == [0, 0, 0]
    assert features[1]["token_offsets"] == [None, None, None, (13, 18), (19, 23), (24, 28), (29, 32), None]
    # token 3 and token 6 are equally central in two windows: the earlier window keeps them
    assert [f["token_is_max_context"][3:7] for f in features] == [
        [True, True, True, True], [False, True, True, True], [False, True, True, True]]
    assert not any(f["token_is_max_context"][i] for f in features for i in (0, 1, 2, 7))


@pytest.mark.parametrize("answer, positions", [
    ("one two", [(4, 5), (0, 0), (0, 0)]),           # inside the first window only
    ("eight nine", [(0, 0), (0, 0), (5, 6)]),        # outside the first two windows
    ("three four", [(0, 0), (3, 4), (0, 0)]),        # crosses window 0's end: whole only in window 1
    ("two three four", [(0, 0), (0, 0), (0, 0)]),    # no window holds it whole
])
def test_answer_positions_point_at_cls_unless_the_window_holds_the_whole_answer(tokenizer, answer, positions):
    features = featurize_squad([_example(answer)], tokenizer, max_seq_length=8, doc_stride=3)
    assert [(f["start_position"], f["end_position"]) for f in features] == positions
    for f, (s, e) in zip(features, positions):
        if s:
            assert " ".join(_tokens(tokenizer, f)[s:e + 1]) == answer


def test_impossible_and_unlocatable_answers(tokenizer, capsys):
    features = featurize_squad([_example(None)], tokenizer, max_seq_length=8, doc_stride=3)
    assert {(f["start_position"], f["end_position"]) for f in features} == {(0, 0)}
    lost = SquadExample("lost", "what", TEN, [("one", 9)])  # "one" is at character 5, not 9
    features = featurize_squad([lost], tokenizer, max_seq_length=8, doc_stride=3)
    assert {(f["start_position"], f["end_position"]) for f in features} == {(NO_TARGET, NO_TARGET)}
    assert "1 answerable question(s) have no answer span" in capsys.readouterr().err


def test_answer_tokens_come_from_character_offsets(tokenizer):
    context = "the  Café   Müllers opened,in paris"
    ids, offsets = tokenizer.tokenize_with_offsets(context)
    assert tokenizer.convert_ids_to_tokens(ids) == ["the", "cafe", "muller", "##s", "opened", ",", "in", "paris"]
    start = context.index("Café")
    assert answer_token_span(offsets, start, start + len("Café   Müller")) == (1, 2)
    # a part of a word selects the whole word piece it falls in; spaces alone select nothing
    assert answer_token_span(offsets, start + 1, start + 2) == (1, 1)
    assert answer_token_span(offsets, 3, 5) is None


def test_question_is_truncated_to_max_query_length(tokenizer):
    example = SquadExample("q", "what is the cat on the mat", TEN, [("nine", TEN.index("nine"))])
    feature = featurize_squad([example], tokenizer, max_seq_length=32, max_query_length=3)[0]
    assert _tokens(tokenizer, feature)[:5] == ["[CLS]", "what", "is", "the", "[SEP]"]
    with pytest.raises(ValueError, match="question q: max_seq_length 6 leaves no room"):
        featurize_squad([example], tokenizer, max_seq_length=6, max_query_length=3)


# --- golden: google-research/bert's run_squad.py featurization ------------------------------------
@pytest.fixture(scope="module")
def run_squad(google_tokenization):
    """run_squad.py itself, imported with stand-ins for the TensorFlow names it touches on import and
    in read_squad_examples / convert_examples_to_features (flags on a private FlagValues, so its
    flag names can't clash with other imports of google's scripts)."""
    from absl import flags
    from conftest import _tensorflow_stub
    own = flags.FlagValues()
    defines = {n: partial(getattr(flags, n), flag_values=own)
               for n in ("DEFINE_string", "DEFINE_bool", "DEFINE_integer", "DEFINE_float")}
    contrib = types.ModuleType("tensorflow.contrib")
    contrib.layers = types.ModuleType("tensorflow.contrib.layers")
    with _tensorflow_stub():
        v1 = sys.modules["tensorflow.compat.v1"]
        v1.flags = types.SimpleNamespace(FLAGS=own, **defines)
        v1.logging = types.SimpleNamespace(info=lambda *a: None, warning=lambda *a: None)
        v1.train = types.SimpleNamespace(Optimizer=object)
        v1.gfile.Open = v1.gfile.GFile
        sys.modules["tensorflow"].contrib = contrib
        sys.modules.update({"tensorflow.contrib": contrib, "tensorflow.contrib.layers": contrib.layers})
        try:
            from bert import run_squad
        finally:
            sys.modules.pop("tensorflow.contrib"), sys.modules.pop("tensorflow.contrib.layers")
    own(["pytest"])
    own.version_2_with_negative = True
    return run_squad


GOLDEN_CONTEXT = ("The Café  Müller, opened in 1921 (in Berlin), served apple-strudel to   visiting "
                  "Pianists; its owner, Hans-Peter O'Neill, sold it in 1956 for 12,000 marks.")


def test_features_match_run_squad(run_squad, google_tokenization, bert_vocab_path, tmp_path):
    answers = ["Café  Müller", "1921", "Berlin", "apple-strudel", "Pianists", "Hans-Peter O'Neill", "1956",
               "12,000 marks", "served apple-strudel to   visiting Pianists"]
    qas = [{"id": str(i), "question": f"question number {i} about the café?",
            "answers": [{"text": a, "answer_start": GOLDEN_CONTEXT.index(a)}], "is_impossible": False}
           for i, a in enumerate(answers)]
    qas.append({"id": "none", "question": "who?", "answers": [], "is_impossible": True})
    path = _squad_file(tmp_path, qas, GOLDEN_CONTEXT)
    settings = {"max_seq_length": 24, "doc_stride": 5, "max_query_length": 6}
    theirs = []
    run_squad.convert_examples_to_features(
        run_squad.read_squad_examples(str(path), is_training=True),
        google_tokenization.FullTokenizer(bert_vocab_path, do_lower_case=True),
        is_training=True, output_fn=theirs.append, **settings)
    tokenizer = BertTokenizer(bert_vocab_path)
    ours = featurize_squad(read_squad(path), tokenizer, **settings)
    assert len(ours) == len(theirs) > 2 * len(qas)
    for o, t in zip(ours, theirs):
        n = len(o["input_ids"])
        assert (o["example_index"], o["window_index"]) == (t.example_index, t.doc_span_index)
        assert _tokens(tokenizer, o) == t.tokens
        assert o["token_type_ids"] == t.segment_ids[:n]
        assert (o["start_position"], o["end_position"]) == (t.start_position, t.end_position)
        assert [i for i, m in enumerate(o["token_is_max_context"]) if m] == \
            [i for i, m in sorted(t.token_is_max_context.items()) if m]
    assert {o["start_position"] for o in ours} - {0}, "some window must hold an answer"


# --- post-processing ---------------------------------------------------------------------------------
def _logits(n, start: dict, end: dict):
    s, e = np.full(n, -10.0, np.float32), np.full(n, -10.0, np.float32)
    for i, v in start.items():
        s[i] = v
    for i, v in end.items():
        e[i] = v
    return s, e


def test_post_processing_picks_the_best_valid_span_as_exact_original_text(tokenizer):
    context = "the  Café   Müllers opened,in paris"
    example = SquadExample("q", "what", context, [("Café   Müller", 5)])
    feature = featurize_squad([example], tokenizer, max_seq_length=32)[0]
    # [CLS] what [SEP] the cafe muller ##s opened , in paris [SEP]: context tokens are 3..10
    logits = _logits(12, start={1: 9.0, 4: 5.0, 5: 4.0}, end={1: 9.0, 3: 8.0, 5: 4.0, 11: 9.5})
    # the question token 1, the [SEP] 11 and end 3 (before every good start) can't be used
    answer = answer_questions([context], [feature], [logits])[0]
    assert answer.answer == "Café   Müller"
    texts = [n["text"] for n in answer.nbest]
    assert texts[:3] == ["Café   Müller", "Müller", "the"]  # 9, 8, then -10 + 8
    assert abs(sum(n["probability"] for n in answer.nbest) - 1) < 1e-6
    assert answer.nbest[0]["start_logit"] == 5.0 and answer.nbest[0]["end_logit"] == 4.0
    short = answer_questions([context], [feature], [logits], QaSettings(max_answer_length=1))[0]
    assert short.answer == "Müller"
    assert answer.null_score is None


def test_post_processing_reads_each_start_in_its_max_context_window(tokenizer):
    features = featurize_squad([_example("three")], tokenizer, max_seq_length=8, doc_stride=3)
    # "three" is token 3: position 6 of window 0 (its max-context window), position 3 of window 1
    window0 = _logits(8, start={6: 1.0}, end={6: 1.0})
    window1 = _logits(8, start={3: 10.0, 4: 2.0}, end={3: 10.0, 4: 2.0})
    answer = answer_questions([TEN], features[:2], [window0, window1])[0]
    assert answer.answer == "four"  # window 1's stronger "three" is ignored: not max context there
    assert [n["text"] for n in answer.nbest][:2] == ["four", "three"]


def test_v2_no_answer_threshold(tokenizer):
    features = featurize_squad([_example("one")], tokenizer, max_seq_length=8, doc_stride=3)
    span = _logits(8, start={0: 3.0, 4: 2.0}, end={0: 3.0, 4: 2.0})  # span "one" scores 4
    others = [_logits(8, start={0: 1.0}, end={0: 2.0}), _logits(8, start={0: 5.0}, end={0: 5.0})]
    outputs = [span, *others]  # null scores 6, 3, 10: the question's null score is the smallest, 3
    v2 = QaSettings(version_2_with_negative=True)
    answer = answer_questions([TEN], features, outputs, v2)[0]
    assert answer.null_score == 3.0 and answer.answer == "one"  # 3 - 4 < 0
    outputs[1] = _logits(8, start={0: 3.0}, end={0: 2.0})  # null 5: 5 - 4 > 0 -> no answer
    answer = answer_questions([TEN], features, outputs, v2)[0]
    assert answer.answer == "" and answer.null_score == 5.0
    assert "" in [n["text"] for n in answer.nbest] and "one" in [n["text"] for n in answer.nbest]
    lenient = QaSettings(version_2_with_negative=True, null_score_diff_threshold=1.5)
    assert answer_questions([TEN], features, outputs, lenient)[0].answer == "one"  # 5 - 4 <= 1.5


def test_post_processing_rejects_logits_with_padding(tokenizer):
    feature = featurize_squad([_example("one")], tokenizer, max_seq_length=32)[0]
    with pytest.raises(ValueError, match="padding not cut"):
        answer_questions([TEN], [feature], [_logits(40, {}, {})])


# --- EM / F1 -----------------------------------------------------------------------------------------
def test_exact_match_and_f1_as_the_official_script():
    # hand-computed with evaluate-v2.0.py's rules (transformers 5 no longer ships its port)
    assert normalize_answer("The  Quick, brown-fox!  an apple") == "quick brownfox apple"
    assert exact_match("the Eiffel tower.", "Eiffel Tower") == 1.0
    assert f1_score("the cat sat", "a cat sat down") == pytest.approx(0.8)  # p 1, r 2/3
    assert f1_score("cat cat", "cat") == pytest.approx(2 / 3)  # p 1/2, r 1
    assert f1_score("", "") == 1.0 and f1_score("a", "") == 1.0 and f1_score("dog", "") == 0.0
    gold = {"a": ["Denver Broncos", "The Denver Broncos"], "b": ["Santa Clara"], "c": [], "d": []}
    predictions = {"a": "Broncos", "b": "Santa Clara, California", "c": "", "d": "Levi's"}
    scores = squad_evaluate(gold, predictions, breakdown=True)
    # a: EM 0, F1 2/3 (p 1, r 1/2); b: EM 0, F1 0.8 (p 2/3, r 1); c: 1, 1; d: 0, 0
    assert scores == pytest.approx({
        "exact": 0.25, "f1": (2 / 3 + 0.8 + 1) / 4, "total": 4,
        "HasAns_exact": 0.0, "HasAns_f1": (2 / 3 + 0.8) / 2, "HasAns_total": 2,
        "NoAns_exact": 0.5, "NoAns_f1": 0.5, "NoAns_total": 2})
    assert squad_evaluate({"a": ["x"], "b": ["y"]}, {"a": "x"}) == {"exact": 0.5, "f1": 0.5, "total": 2}


# --- reading -----------------------------------------------------------------------------------------
def _squad_file(tmp_path, qas, context="the cat sat on the mat", name="train.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}), encoding="utf-8")
    return path


def test_reader_reads_v1_and_v2_and_counts_unfound_answers(tmp_path, capsys):
    path = _squad_file(tmp_path, [
        {"id": "1", "question": "who sat ?", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "2", "question": "on what ?", "answers": [{"text": "mat", "answer_start": 3}]},
        {"id": "3", "question": "what ran ?", "answers": [], "is_impossible": True}])
    examples = read_squad(path)
    assert examples[0] == SquadExample("1", "who sat ?", "the cat sat on the mat", [("cat", 4)], False)
    assert examples[2].is_impossible and examples[2].answers == []
    assert unfound_answer_ids(examples) == ["2"]
    err = capsys.readouterr().err
    assert str(path) in err and "1 question(s) of 3 have an answer whose text is not at its answer_start" in err
    assert "ids: 2" in err
    with pytest.raises(ValueError, match="is_impossible.*version_2_with_negative=True"):
        QuestionAnsweringTask().read(path)
    assert len(QuestionAnsweringTask(version_2_with_negative=True).read(path)) == 3


@pytest.mark.parametrize("text, problem", [
    ("", "the file is empty"),
    ("{\"data\": [", r"train.json:1:\d+: not valid JSON"),
    ("{\"version\": 1}", "top level: missing 'data'"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "7", "answers": []}]}]}]}',
     r"data\[0\].paragraphs\[0\].qas\[0\] \(id 7\): missing 'question'"),
    (('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "7", "question": "q", '
      '"answers": [{"text": "x", "answer_start": "0"}]}]}]}]}'), r"answers\[0\]: 'answer_start' should be int"),
    ('{"data": [{"paragraphs": [{"qas": []}]}]}', r"data\[0\].paragraphs\[0\]: missing 'context'"),
    ('{"data": []}', "no questions"),
])
def test_reader_errors_name_the_file_and_the_place(tmp_path, text, problem):
    path = tmp_path / "train.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=problem) as error:
        read_squad(path)
    assert str(path) in str(error.value)


def test_reader_rejects_duplicate_ids(tmp_path):
    qa = {"id": "1", "question": "who sat ?", "answers": [{"text": "cat", "answer_start": 4}]}
    with pytest.raises(ValueError, match="question id '1' appears twice"):
        read_squad(_squad_file(tmp_path, [qa, qa]))


# --- the task end to end -----------------------------------------------------------------------------
def test_task_options_state_and_loss():
    task = QuestionAnsweringTask(max_seq_length=64, doc_stride=16)
    state = task.state()
    assert state["task"] == "squad" and state["doc_stride"] == 16 and state["n_best_size"] == 20
    assert QuestionAnsweringTask(**{k: v for k, v in state.items() if k != "task"}).state() == state
    with pytest.raises(ValueError, match="unknown option"):
        QuestionAnsweringTask(stride=3)
    logits = (torch.zeros(2, 5), torch.zeros(2, 5))
    batch = {"start_position": torch.tensor([1, NO_TARGET]), "end_position": torch.tensor([NO_TARGET, NO_TARGET])}
    assert task.loss(logits, batch).item() == pytest.approx(np.log(5) / 2)  # the unlocatable one is skipped


STORIES = [("the cat sat on the mat", "who sat ?", "cat"), ("the dog ran in the park", "where is the dog ?", "park"),
           ("the bird sang in the tree", "who sang ?", "bird"), ("the fish swam in the sea", "where is the fish ?", "sea"),
           ("the cow ate the grass", "what is ate ?", "grass"), ("the fox hid in the den", "where is the fox ?", "den"),
           ("the owl slept in the barn", "who slept ?", "owl"), ("the bee flew to the hive", "where is the bee ?", "hive")]


def test_tiny_bert_learns_eight_questions(tokenizer):
    torch.manual_seed(0)
    examples = [SquadExample(str(i), q, c, [(a, c.index(a))]) for i, (c, q, a) in enumerate(STORIES)]
    task = QuestionAnsweringTask(max_seq_length=32)
    features = task.featurize(examples, tokenizer)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = task.build_model(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    batch = task.collate(features, tokenizer.pad_token_id)
    for _ in range(30):
        loss = task.loss(task.forward(model, batch), batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        outputs = task.unbatch(task.forward(model, batch), batch)
    assert task.evaluate(examples, features, outputs) == {"exact": 1.0, "f1": 1.0, "total": 8}
    predictions = task.predictions(examples, features, outputs)
    assert [p["answer"] for p in predictions] == [a for _, _, a in STORIES]
    assert set(predictions[0]) == {"id", "answer", "nbest"}


def test_long_answers_come_back_whole_only_with_a_larger_max_answer_length(tmp_path):
    """finetune --max-answer-length is saved in task.json, so predict answers as training did; predict
    --max-answer-length replaces it. Every answer here is 40 word pieces: google's default cap of 30
    cuts it, 128 keeps it whole."""
    from bertlab import BertModel, save_pretrained
    from cli_cases import assert_ok, run_cli
    words = [f"w{i}" for i in range(60)]
    tokenizer = BertTokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                            "what", "?", *words])})
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=80, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    save_pretrained(BertModel(config), tmp_path / "init", tokenizer)
    rng = np.random.default_rng(0)
    paragraphs = []
    for i in range(8):
        context = " ".join(rng.permutation(words)[:50])
        answer = " ".join(context.split()[5:45])
        paragraphs.append({"context": context, "qas": [{"id": str(i), "question": "what ?", "answers": [
            {"text": answer, "answer_start": context.index(answer)}]}]})
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"data": [{"title": "t", "paragraphs": paragraphs}]}), encoding="utf-8")
    done = assert_ok(run_cli("finetune", "--task", "squad", "--model", tmp_path / "init", "--train", train, "-o",
                             tmp_path / "run", "--max-seq-length", "64", "--epochs", "60", "--batch-size", "8",
                             "--lr", "3e-3", "--max-answer-length", "128", "--seed", "0", "--quiet", "--test", train))
    # a labelled SQuAD test file is scored (it was reported as "test": {}: the check looked for a `label`)
    assert json.loads(done.err.strip().splitlines()[-1])["test"] == {"exact": 1.0, "f1": 1.0, "total": 8}
    # the same questions without their answers are only predicted
    from bertlab.finetune.predict import predict_file
    for paragraph in paragraphs:
        del paragraph["qas"][0]["answers"]
    unlabelled = tmp_path / "unlabelled.json"
    unlabelled.write_text(json.dumps({"data": [{"title": "t", "paragraphs": paragraphs}]}), encoding="utf-8")
    assert predict_file(tmp_path / "run" / "model", unlabelled, tmp_path / "u.jsonl", progress=False) == {}
    assert len((tmp_path / "u.jsonl").read_text().splitlines()) == 8
    assert json.loads((tmp_path / "run" / "model" / "task.json").read_text())["max_answer_length"] == 128

    def answer_lengths(*flags):
        out = tmp_path / f"p{len(flags)}.jsonl"
        assert_ok(run_cli("predict", "--model", tmp_path / "run" / "model", train, "-o", out, "--quiet", *flags))
        return [len(json.loads(line)["answer"].split()) for line in out.read_text().splitlines()]
    assert answer_lengths() == [40] * 8
    assert max(answer_lengths("--max-answer-length", "30")) <= 30
    line = run_cli("predict", "--model", tmp_path / "run" / "model", train, "--n-best-size", "0").err
    assert "--n-best-size" in line and "at least 1" in line


def test_answer_flags_are_refused_for_other_tasks(tmp_path):
    from cli_cases import assert_error, run_cli
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\na\tx\n", encoding="utf-8")
    assert_error(run_cli("finetune", "--task", "classify", "--model", tmp_path, "--train", train, "-o", tmp_path / "o",
                         "--max-answer-length", "64"), "--max-answer-length is for the squad task, not classify")


def test_questions_with_gold_answers_are_labelled():
    task = QuestionAnsweringTask(version_2_with_negative=True)
    assert task.is_labelled([_example("three"), _example(None)])
    assert not task.is_labelled([_example("three"), SquadExample("u", "what", TEN, [])])
    assert not task.is_labelled([])


# --- golden: HF run_qa's windows (benchmarks/qa_parity.py compares the two sides on them) ------------
def test_windows_and_labels_match_run_qa_with_the_stride_converted(minilm_dir):
    """Our doc_stride is google's step between window starts; HF's stride is the overlap of two
    windows. With overlap = (max_length - question pieces - 3) - doc_stride for each question, HF's
    tokenizer cuts the same windows, and run_qa's labels (answer tokens, or [CLS] for an answer the
    window cuts) equal ours, long answers crossing a window boundary included."""
    transformers = pytest.importorskip("transformers")
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "benchmarks"))
    import finetune_hf
    context = " ".join([GOLDEN_CONTEXT] * 3)
    answers = ["Café  Müller", "served apple-strudel to   visiting Pianists; its owner, Hans-Peter O'Neill, sold it",
               "12,000 marks. The Café  Müller, opened in 1921 (in Berlin), served apple-strudel"]
    examples = [SquadExample(str(i), f"what is answer {i} of the café?", context,
                             [(a, context.index(a, 40 * i))]) for i, a in enumerate(answers)]
    ours = featurize_squad(examples, BertTokenizer.from_pretrained(minilm_dir), max_seq_length=48, doc_stride=10)
    theirs, _ = finetune_hf.features_qa(transformers.AutoTokenizer.from_pretrained(minilm_dir), examples, 48, 10)
    assert len(ours) == len(theirs) > 3 * len(examples)
    assert [o["input_ids"] for o in ours] == [t["input_ids"] for t in theirs]
    assert [(o["start_position"], o["end_position"]) for o in ours] == \
        [(t["start_positions"], t["end_positions"]) for t in theirs]
    assert sum(o["start_position"] > 0 for o in ours) >= len(examples)


def test_option_questions_from_a_man_page(tmp_path):
    """benchmarks/finetune_tasks.py's `options` set (qa_parity.py's long answers): each .TP entry
    whose tag is an option gives a question whose answer, the entry's text, sits at answer_start."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "benchmarks"))
    import finetune_tasks
    page = "\n".join([".TH DEMO 1", ".SH OPTIONS", ".TP", r"\fB\-a\fR, \fB\-\-all\fR",
                      "do not ignore entries", "starting with .", ".TP", ".B \\-\\-help", "print a short help",
                      ".TP", "FILES", "not an option entry at all", ".TP", r'.BR \-x ", " \-\-extra',
                      r"list \fIthe\fP extra things here", ".SH SEE ALSO"])
    entries = finetune_tasks.option_entries(page)
    assert entries == [("-a, --all", "do not ignore entries starting with ."), ("--help", "print a short help"),
                       ("-x, --extra", "list the extra things here")]
    paragraphs = finetune_tasks.option_paragraphs("demo", entries, __import__("random").Random(0), 150, 0)
    (tmp_path / "o.json").write_text(json.dumps({"data": [{"paragraphs": paragraphs}]}), encoding="utf-8")
    examples = read_squad(tmp_path / "o.json")
    assert [e.question for e in examples][0] == "What does the option -a, --all of demo do?"
    assert all(e.found_answers() == e.answers for e in examples) and len(examples) == 3


def _tiny_base(folder, **dropout):
    """A tiny random BERT (40 words, 2 layers of 32) saved at `folder` as a checkpoint both
    load_base_model and transformers' from_pretrained read: its (tokenizer, config)."""
    from bertlab import BertModel, save_pretrained
    words = [f"w{i}" for i in range(40)]
    tokenizer = BertTokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])})
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, **dropout)
    torch.manual_seed(0)
    save_pretrained(BertModel(config), folder, tokenizer)
    return tokenizer, config


# --- golden: the new span head is the tensor HF's from_pretrained draws for the seed ------------------
def test_the_span_head_for_a_seed_is_hfs_draw_for_it_whatever_the_encoders_size(tmp_path):
    """load_base_model(seed=s) starts the span head from the tensor transformers'
    BertForQuestionAnswering.from_pretrained draws under torch.manual_seed(s) (normal(0, 0.02), zero
    bias), so a seed starts both sides from the same weights; added special tokens (more embedding
    rows drawn first) leave it alone, and another seed draws another head."""
    transformers = pytest.importorskip("transformers")
    from bertlab.finetune.setup import load_base_model
    tokenizer, _ = _tiny_base(tmp_path / "base")
    task = QuestionAnsweringTask(max_seq_length=32)
    heads = {}
    for seed in (3, 4):
        ours = load_base_model(task, str(tmp_path / "base"), quiet=True, seed=seed).model.qa_outputs
        torch.manual_seed(seed)
        theirs = transformers.BertForQuestionAnswering.from_pretrained(tmp_path / "base").qa_outputs
        assert torch.equal(ours.weight, theirs.weight) and torch.equal(ours.bias, theirs.bias)
        assert not ours.bias.any() and 0.01 < float(ours.weight.detach().std()) < 0.03
        heads[seed] = ours.weight.detach().clone()
    assert not torch.equal(heads[3], heads[4])
    grown = load_base_model(task, str(tmp_path / "base"), added_tokens=["[E1]"], quiet=True, seed=3).model
    assert grown.bert.embeddings.word_embeddings.weight.shape[0] == len(tokenizer) + 1
    assert torch.equal(grown.qa_outputs.weight, heads[3])


# --- golden: a training step equals HF's (benchmarks/qa_step_parity.py runs it on MiniLM) ------------
def test_training_steps_equal_hf_trainers_once_its_two_differences_are_aligned(tmp_path):
    """From the same weights on the same padded batches, bertlab's fine-tuning step (its optimizer,
    schedule, clip and span loss, through the engine's train_step) and HF's (BertForQuestionAnswering,
    Trainer's optimizer) give the same losses step after step, once HF's two differences are aligned:
    its head's softmax also covers padding (masked here, as ours does) and its warmup's first step has
    lr 0 (ours (step+1)/warmup: HF's optimizer stepped with our schedule here). Without those, HF's
    loss differs as soon as a batch holds padding."""
    transformers = pytest.importorskip("transformers")
    from bertlab.finetune.objective import FineTuning, FinetuneSettings
    from bertlab.finetune.setup import load_base_model
    from bertlab.training.engine import train_step
    from bertlab.training.schedules import make_scheduler
    tokenizer, _ = _tiny_base(tmp_path / "base", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    task = QuestionAnsweringTask(max_seq_length=32)
    ours = load_base_model(task, str(tmp_path / "base"), quiet=True, seed=3).model
    theirs = transformers.BertForQuestionAnswering.from_pretrained(tmp_path / "base")
    theirs.qa_outputs.load_state_dict(ours.qa_outputs.state_dict())
    start_head = ours.qa_outputs.weight.detach().clone()

    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(6):  # 4 rows of 10 to 20 real tokens, padded to the longest
        lengths = torch.randint(10, 21, (4,), generator=g)
        mask = (torch.arange(int(lengths.max()))[None] < lengths[:, None]).long()
        ids = torch.randint(5, len(tokenizer), mask.shape, generator=g) * mask
        start = torch.stack([torch.randint(0, int(n) - 3, (1,), generator=g)[0] for n in lengths])
        batches.append({"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask,
                        "start_position": start, "end_position": start + 2})
    s = FinetuneSettings(out=str(tmp_path / "run"), lr=1e-3, batch_size=4, weight_decay=0.01, warmup_proportion=0.5)
    objective = FineTuning.__new__(FineTuning)  # its optimizer() and scheduler() alone
    optimizer = objective.optimizer(ours, s)
    scheduler = objective.scheduler(optimizer, s, len(batches))
    ours.train()
    it = iter(batches)
    our_losses = [float(train_step(ours, optimizer, scheduler, lambda: next(it), grad_clip=1.0,
                                   loss_of=task.training_loss)) for _ in batches]

    args = transformers.TrainingArguments(output_dir=str(tmp_path / "hf"), learning_rate=1e-3, weight_decay=0.01,
                                          adam_epsilon=1e-6, max_steps=len(batches), report_to=[], use_cpu=True)
    trainer = transformers.Trainer(model=theirs, args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=len(batches))
    hf_optimizer = trainer.optimizer
    hf_scheduler = make_scheduler(hf_optimizer, "linear", int(0.5 * len(batches)), len(batches), min_ratio=0.0)
    theirs.train()
    hf_losses, hf_padded_losses = [], []
    for batch in batches:
        logits = theirs.qa_outputs(theirs.bert(batch["input_ids"], batch["attention_mask"],
                                               batch["token_type_ids"])[0])
        padded = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        token_type_ids=batch["token_type_ids"], start_positions=batch["start_position"],
                        end_positions=batch["end_position"]).loss
        start, end = logits.masked_fill(~batch["attention_mask"].bool()[..., None], torch.finfo(logits.dtype).min).unbind(-1)
        loss = (F.cross_entropy(start, batch["start_position"]) + F.cross_entropy(end, batch["end_position"])) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        hf_optimizer.step()
        hf_scheduler.step()
        hf_optimizer.zero_grad(set_to_none=True)
        hf_losses.append(loss.item())
        hf_padded_losses.append(padded.item())
    np.testing.assert_allclose(our_losses, hf_losses, atol=1e-5)
    # the weights they end at are the same too, and not where they started
    torch.testing.assert_close(ours.qa_outputs.weight, theirs.qa_outputs.weight, atol=1e-5, rtol=0)
    assert (ours.qa_outputs.weight - start_head).abs().max() > 1e-3
    assert abs(hf_padded_losses[0] - our_losses[0]) > 1e-3  # HF's own loss counts the padding


def test_a_training_step_with_dropout_equals_hfs_given_the_same_masks(tmp_path, monkeypatch):
    """Dropout on (0.1, hidden and attention): with one generator drawing every mask for both models
    in call order (embeddings, then per layer attention probabilities, attention output, feed-forward
    output), bertlab's span model and HF's give the same loss and gradients: the training forward
    puts dropout where BERT's does. The plain model keeps the padded layout, so each mask has HF's
    shape; the test below shows the accelerated (packed) path equal to this one."""

    transformers = pytest.importorskip("transformers")
    from bertlab.finetune.setup import load_base_model
    from bertlab.interop.hf_bert import to_hf_name
    tokenizer, config = _tiny_base(tmp_path / "base")
    task = QuestionAnsweringTask(max_seq_length=32)
    ours = load_base_model(task, str(tmp_path / "base"), quiet=True, seed=3).model
    theirs = transformers.BertForQuestionAnswering.from_pretrained(tmp_path / "base", attn_implementation="eager")
    theirs.qa_outputs.load_state_dict(ours.qa_outputs.state_dict())

    masks, shapes = torch.Generator(), []

    def shared_dropout(x, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return x
        shapes.append(tuple(x.shape))
        return x * (torch.rand(x.shape, generator=masks) >= p).to(x.dtype) / (1 - p)

    monkeypatch.setattr(F, "dropout", shared_dropout)

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, len(tokenizer), (3, 20), generator=g)
    types = torch.zeros_like(ids)
    types[:, 10:] = 1
    start, end = torch.tensor([2, 5, 11]), torch.tensor([4, 5, 14])
    for lengths in ([20, 20, 20], [20, 16, 12]):  # unpadded (the default path), then padded
        mask = (torch.arange(20)[None] < torch.tensor(lengths)[:, None]).long()
        results = {}
        for name, model in (("ours", ours), ("hf", theirs)):
            model.train()
            model.zero_grad()
            masks.manual_seed(5)
            shapes.clear()
            if name == "ours":  # load_base_model's model is plain: fit() accelerates it
                s, e = model(ids * mask, types, mask)
            else:
                out = model(input_ids=ids * mask, token_type_ids=types, attention_mask=mask)
                low = torch.finfo(torch.float32).min
                s, e = (t.masked_fill(~mask.bool(), low) for t in (out.start_logits, out.end_logits))
            loss = (F.cross_entropy(s, start) + F.cross_entropy(e, end)) / 2
            loss.backward()
            grads = {(to_hf_name(n) if name == "ours" else n): p.grad for n, p in model.named_parameters()
                     if p.grad is not None}
            results[name] = (loss.item(), grads, list(shapes))
        (our_loss, ours_grads, our_shapes), (hf_loss, hf_grads, hf_shapes) = results["ours"], results["hf"]
        assert our_shapes == hf_shapes and len(our_shapes) == 1 + 3 * config.num_hidden_layers
        assert our_loss == pytest.approx(hf_loss, abs=1e-6)
        assert set(ours_grads) == set(hf_grads)
        for name, grad in hf_grads.items():
            torch.testing.assert_close(ours_grads[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_the_packed_bucketed_training_step_equals_the_padded_one_given_the_same_masks(monkeypatch):
    """With dropout on, BERT's CPU training path (the padding packed away, attention bucket by
    bucket) and the plain padded path (models.accelerate.plain_model) give the same loss and gradients when every
    dropout drops the same units: each mask is drawn for the padded layout and cut to the packed
    rows or to a bucket's rows and length. So the speed paths change the layout of the masks, never
    which units a step can drop."""
    import importlib

    from bertlab.core.fast_paths import unpadding
    from bertlab.models.accelerate import accelerate, plain_model
    from bertlab.models.bert_tasks import BertForQuestionAnswering
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=160)
    torch.manual_seed(0)
    model = accelerate(BertForQuestionAnswering(config)).train()
    lengths = torch.tensor([150, 140, 30, 27, 12])  # long enough that attention takes two buckets
    mask = (torch.arange(150)[None] < lengths[:, None]).long()
    ids = torch.randint(5, 50, (5, 150)) * mask
    start, end = torch.tensor([3, 2, 1, 5, 1]), torch.tensor([7, 9, 4, 5, 2])

    state = {}
    make_packing = unpadding.Packing.__init__

    def remember(self, attention_mask, buckets=False):
        make_packing(self, attention_mask, buckets)
        state["packing"] = self
    monkeypatch.setattr(unpadding.Packing, "__init__", remember)

    def keyed(x, p):
        """The mask of this call, drawn for the padded layout, in x's layout."""
        packing = None if state["plain"] else state.get("packing")
        if x.dim() == 4:  # attention probabilities: one draw per layer, a bucket takes its rows
            layer, bucket = state["attention"], None
            if packing is not None and packing.buckets:
                layer, k = divmod(state["attention"], len(packing.buckets))
                bucket = packing.buckets[k]
            state["attention"] += 1
            g = torch.Generator().manual_seed(100 + layer)
            full = torch.rand(5, x.size(1), 150, 150, generator=g)
            if bucket is not None:
                full = full[bucket.batch_rows][:, :, :bucket.length, :bucket.length]
        else:  # hidden states, (batch, len, hidden) or packed (tokens, hidden)
            state["hidden"] += 1
            g = torch.Generator().manual_seed(state["hidden"])
            full = torch.rand(5 * 150, x.size(-1), generator=g)
            full = full[packing.index] if packing is not None else full.view(x.shape)
        state["shapes"].append(tuple(x.shape))
        return (full >= p).to(x.dtype) / (1 - p)

    numpy_dropout = importlib.import_module("bertlab.core.fast_paths.numpy_dropout")
    monkeypatch.setattr(numpy_dropout._NumpyDropout, "apply", lambda x, p: x * keyed(x, p))
    monkeypatch.setattr(numpy_dropout._NumpyDropoutAdd, "apply", lambda x, residual, p: residual + x * keyed(x, p))
    # the plain model's dropout is torch's
    monkeypatch.setattr(F, "dropout", lambda x, p=0.5, training=True, inplace=False: x * keyed(x, p) if training and p
                        else x)
    results = {}
    for path in ("packed", "padded"):
        state.update(packing=None, attention=0, hidden=0, shapes=[], plain=path == "padded")
        model.zero_grad()
        if path == "padded":
            with plain_model(model):
                s, e = model(ids, None, mask)
        else:
            s, e = model(ids, None, mask)
        loss = (F.cross_entropy(s, start) + F.cross_entropy(e, end)) / 2
        loss.backward()
        results[path] = loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results[path + " shapes"] = list(state["shapes"])
        if path == "packed":
            buckets = len(state["packing"].buckets)
    assert state["packing"] is None and buckets > 1  # the padded run packed nothing; the packed one bucketed
    attention_calls = [shape for shape in results["packed shapes"] if len(shape) == 4]
    assert len(attention_calls) == buckets * config.num_hidden_layers
    assert results["packed"][0] == pytest.approx(results["padded"][0], abs=1e-6)
    (_, packed), (_, padded) = results["packed"], results["padded"]
    assert set(packed) == set(padded)
    for name, grad in padded.items():
        torch.testing.assert_close(packed[name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_qa_parity_compares_the_two_sides_answers_question_by_question(tmp_path):
    """benchmarks/qa_parity.py --compare: which side each differing answer favours, and how each
    side's wrong answers are wrong (cut short, runs long, overlaps, missed)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "benchmarks"))
    import argparse

    import qa_parity
    context = "-a: list all the files. -b: print the size in blocks of one kilobyte. -c: count."
    gold = ["list all the files.", "print the size in blocks of one kilobyte.", "count."]
    qas = [{"id": f"q{i}", "question": f"What does option {i} do?",
            "answers": [{"text": g, "answer_start": context.index(g)}]} for i, g in enumerate(gold)]
    (tmp_path / "test.json").write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}),
                                        encoding="utf-8")
    answers = {"bertlab": ["list all the files.", "print the size", "count."],
               "hf": ["list all the files. -b: print", "print the size in blocks of one kilobyte.", "-a:"]}
    for side, texts in answers.items():
        (tmp_path / f"{side}0").mkdir()
        (tmp_path / f"{side}0" / "test_predictions.jsonl").write_text(
            "".join(json.dumps({"id": f"q{i}", "answer": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    report = qa_parity.compare(str(tmp_path), str(tmp_path), argparse.Namespace(seeds="0"))
    (row,) = report["seeds"]
    assert (row["answers_differing"], row["bertlab_better"], row["hf_better"]) == (3, 2, 1)
    assert row["kinds"]["bertlab"] == {"exact": 2, "cut short": 1, "runs long": 0, "overlaps": 0, "missed": 0}
    assert row["kinds"]["hf"] == {"exact": 1, "cut short": 0, "runs long": 1, "overlaps": 0, "missed": 1}
    assert row["f1_by_length"]["1-10 words"]["questions"] == 3
    assert set(report["differing"]) == {"0:q0", "0:q1", "0:q2"}
