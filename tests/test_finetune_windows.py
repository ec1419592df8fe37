from bertlab.finetune.windows import Window, is_max_context, sliding_windows


def test_windows_cover_the_text_with_run_squads_stride():
    # run_squad: 10 tokens, 4 per window, stride 3 -> starts 0, 3, 6 (the last ends at the text's end)
    assert sliding_windows(10, 4, 3) == [Window(0, 4), Window(3, 4), Window(6, 4)]
    assert sliding_windows(3, 4, 3) == [Window(0, 3)]
    assert sliding_windows(0, 4, 3) == [Window(0, 0)]


def test_max_context_prefers_the_window_where_the_token_is_central():
    windows = sliding_windows(10, 4, 3)  # [0..3], [3..6], [6..9]
    assert is_max_context(windows, 0, 1) and not is_max_context(windows, 1, 1)
    # token 3: min(3, 0) in window 0, min(0, 3) in window 1 -> tie broken by order (first wins)
    assert is_max_context(windows, 0, 3)
    assert is_max_context(windows, 1, 4) and is_max_context(windows, 1, 5)
    assert is_max_context(windows, 2, 8)
