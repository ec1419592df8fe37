"""Named recipes: the notes' improvements to BERT's pretraining ("BERT 的不足", notes file 001) as
one word each, for `bertlab create-pretraining-data --recipe` and `bertlab pretrain --recipe`.

    recipe    create-pretraining-data sets                 pretrain sets
    bert      --mode nsp (next-sentence pairs)            (nothing: BERT presets, AdamW)
    roberta   --mode full-sentences --dynamic-masking     checks the data was made so
              (no NSP, whole sentences packed across
              documents, a fresh mask every batch)
    albert    --mode sop (sentence-order pairs)           --preset albert-base (unless a model is
                                                          given), --optimizer lamb; checks the data
                                                          is sentence-order pairs
    modernbert  --mode full-sentences --dynamic-masking   --preset modernbert-small (unless a model
              --masked-lm-prob 0.3 (30% masked, and       is given), --phase2-rope-theta 160000 (the
              --max-predictions-per-seq 30% of the        global layers' rotary base in the --data-512
              length: ModernBERT's, Warner et al. 2024)   phase: its long-context phase); checks the
                                                          data was made so

A flag given beside a recipe must agree with it (an error otherwise), so a recipe never silently
overrides what was asked for.
"""
import math

DATA = {
    "bert": {"mode": "nsp"},
    "roberta": {"mode": "full-sentences", "dynamic_masking": True},
    "albert": {"mode": "sop"},
    "modernbert": {"mode": "full-sentences", "dynamic_masking": True, "masked_lm_prob": 0.3},
}
TRAINING = {
    "bert": {},
    "roberta": {},
    "albert": {"preset": "albert-base", "optimizer": "lamb"},
    "modernbert": {"preset": "modernbert-small", "phase2_rope_theta": 160000.0},
}
MASKED_LM_PROB, MAX_PREDICTIONS = 0.15, 20  # google's defaults
RECIPES = tuple(DATA)


def _check(recipe: str):
    if recipe not in DATA:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {RECIPES}")


def data_settings(recipe: str | None, mode: str | None, dynamic_masking: bool, masked_lm_prob: float | None = None,
                  max_predictions_per_seq: int | None = None, max_seq_length: int = 128) -> dict:
    """{mode, dynamic_masking, masked_lm_prob, max_predictions_per_seq} for create-pretraining-data:
    the recipe's, checked against the flags given (None = not given; dynamic masking can only be
    asked for, not refused). A recipe that sets the masking rate predicts up to that share of the
    pieces (max_seq_length x masked_lm_prob, rounded up: google's 20 of 128 at 15%)."""
    wanted = {"mode": "nsp"}
    if recipe is not None:
        _check(recipe)
        wanted = DATA[recipe]
        if mode is not None and mode != wanted["mode"]:
            raise ValueError(f"--recipe {recipe} makes --mode {wanted['mode']} data, not --mode {mode}")
        if masked_lm_prob is not None and "masked_lm_prob" in wanted and masked_lm_prob != wanted["masked_lm_prob"]:
            raise ValueError(f"--recipe {recipe} masks {wanted['masked_lm_prob']:g} of the pieces, not "
                             f"--masked-lm-prob {masked_lm_prob:g}")
    prob = wanted.get("masked_lm_prob", masked_lm_prob or MASKED_LM_PROB)
    if max_predictions_per_seq is None:
        max_predictions_per_seq = math.ceil(max_seq_length * prob) if "masked_lm_prob" in wanted else MAX_PREDICTIONS
    return {"mode": mode or wanted["mode"], "dynamic_masking": dynamic_masking or wanted.get("dynamic_masking", False),
            "masked_lm_prob": prob, "max_predictions_per_seq": max_predictions_per_seq}


def training_settings(recipe: str | None, meta: dict, data: str, preset=None, optimizer=None,
                      model_given=False, phase2_rope_theta: float | None = None) -> dict:
    """{"preset", "optimizer", "phase2_rope_theta"} for pretrain: the recipe's defaults where the
    flag was not given, after checking that the shards `data` (their meta.json `meta`) were made
    for the recipe."""
    if recipe is None:
        return {"preset": preset, "optimizer": optimizer or "adamw", "phase2_rope_theta": phase2_rope_theta}
    _check(recipe)
    settings = meta.get("settings", {})
    made = settings.get("mode", "nsp" if meta.get("nsp", True) else "full-sentences")
    prob = settings.get("masked_lm_prob", MASKED_LM_PROB)
    want = DATA[recipe]
    if made != want["mode"] or (want.get("dynamic_masking") and not meta.get("dynamic_masking")) or \
            prob != want.get("masked_lm_prob", prob):
        flags = f"--mode {made}" + (" --dynamic-masking" if meta.get("dynamic_masking") else "") + \
            f" --masked-lm-prob {prob:g}"
        raise ValueError(f"--recipe {recipe}: {data} was made with {flags}; make it with "
                         f"`bertlab create-pretraining-data --recipe {recipe}`")
    train = TRAINING[recipe]
    family = train.get("preset", "").split("-")[0]
    if preset and family and not preset.startswith(family):
        raise ValueError(f"--recipe {recipe} trains a {family} model; --preset {preset} is not one")
    return {"preset": preset or (None if model_given else train.get("preset")),
            "optimizer": optimizer or train.get("optimizer", "adamw"),
            "phase2_rope_theta": phase2_rope_theta or train.get("phase2_rope_theta")}
