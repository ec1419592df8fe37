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

A flag given beside a recipe must agree with it (an error otherwise), so a recipe never silently
overrides what was asked for.
"""
DATA = {
    "bert": {"mode": "nsp"},
    "roberta": {"mode": "full-sentences", "dynamic_masking": True},
    "albert": {"mode": "sop"},
}
TRAINING = {
    "bert": {},
    "roberta": {},
    "albert": {"preset": "albert-base", "optimizer": "lamb"},
}
RECIPES = tuple(DATA)


def _check(recipe: str):
    if recipe not in DATA:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {RECIPES}")


def data_settings(recipe: str | None, mode: str | None, dynamic_masking: bool) -> tuple[str, bool]:
    """(mode, dynamic_masking) for create-pretraining-data: the recipe's, checked against the
    flags given (mode None = not given; dynamic masking can only be asked for, not refused)."""
    if recipe is None:
        return mode or "nsp", dynamic_masking
    _check(recipe)
    wanted = DATA[recipe]
    if mode is not None and mode != wanted["mode"]:
        raise ValueError(f"--recipe {recipe} makes --mode {wanted['mode']} data, not --mode {mode}")
    return wanted["mode"], dynamic_masking or wanted.get("dynamic_masking", False)


def training_settings(recipe: str | None, meta: dict, data: str, preset=None, optimizer=None,
                      model_given=False) -> dict:
    """{"preset", "optimizer"} for pretrain: the recipe's defaults where the flag was not given,
    after checking that the shards `data` (their meta.json `meta`) were made for the recipe."""
    if recipe is None:
        return {"preset": preset, "optimizer": optimizer or "adamw"}
    _check(recipe)
    settings = meta.get("settings", {})
    made = settings.get("mode", "nsp" if meta.get("nsp", True) else "full-sentences")
    want = DATA[recipe]
    if made != want["mode"] or (want.get("dynamic_masking") and not meta.get("dynamic_masking")):
        flags = f"--mode {made}" + (" --dynamic-masking" if meta.get("dynamic_masking") else "")
        raise ValueError(f"--recipe {recipe}: {data} was made with {flags}; make it with "
                         f"`bertlab create-pretraining-data --recipe {recipe}`")
    train = TRAINING[recipe]
    return {"preset": preset or (None if model_given else train.get("preset")),
            "optimizer": optimizer or train.get("optimizer", "adamw")}
