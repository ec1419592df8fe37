"""The web page of `bertlab serve` in a real headless browser (Debian's chromium driven by selenium):
pick each model, type, click, wait for the answer and check it against the library function.
Screenshots go to the test's tmp folder, or to $SERVE_SCREENSHOTS when set."""
import os
import shutil

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("no chromium and chromedriver on this machine (as root: apt-get install chromium chromium-driver; "
                ".ci/run installs them where it can)", allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from bertlab.finetune.tasks import task_from_state
from bertlab.interop.load import load_model  # noqa: E402
from bertlab.serve import create_app  # noqa: E402
from serve_fixtures import build_models, running_server  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    folders = build_models(tmp_path_factory.mktemp("serve-browser"))
    return {"minilm": load_model("minilm"), **{name: load_model(folder) for name, folder in folders.items()}}


@pytest.fixture(scope="module")
def page(loaded):
    """(browser on the served page, server url)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1100,1000"):
        options.add_argument(flag)
    # the driver's path is given, so selenium never tries to download one
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    with running_server(create_app(loaded)) as (url, _):
        browser = webdriver.Chrome(options=options, service=service)
        try:
            browser.get(url + "/")
            WebDriverWait(browser, 30).until(lambda b: len(Select(b.find_element(By.ID, "model")).options) == 7)
            yield browser
        finally:
            browser.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = os.environ.get("SERVE_SCREENSHOTS") or str(tmp_path_factory.mktemp("screenshots"))
    os.makedirs(folder, exist_ok=True)
    return folder


def use(browser, model, tab):
    Select(browser.find_element(By.ID, "model")).select_by_value(model)
    browser.find_element(By.CSS_SELECTOR, f'#tabs button[data-tab="{tab}"]').click()
    assert browser.find_element(By.CSS_SELECTOR, f'section[data-task="{tab}"]').is_displayed()


def type_into(browser, element_id, text):
    box = browser.find_element(By.ID, element_id)
    box.clear()
    box.send_keys(text)


def wait_text(browser, element_id, timeout=30) -> str:
    WebDriverWait(browser, timeout).until(lambda b: b.find_element(By.ID, element_id).text.strip())
    return browser.find_element(By.ID, element_id).text


def test_search_and_attention_heatmap(page, loaded, shots):
    from bertlab.inference.embed import embed_texts
    use(page, "minilm", "similar")
    type_into(page, "similar-query", "a kitten")
    page.find_element(By.ID, "similar-run").click()
    WebDriverWait(page, 30).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#similar-out li")) == 4)
    hits = [li.text for li in page.find_elements(By.CSS_SELECTOR, "#similar-out li")]
    texts = page.find_element(By.ID, "similar-texts").get_attribute("value").split("\n")
    m = loaded["minilm"]
    vectors = embed_texts(m.model, m.tokenizer, ["a kitten"] + texts, normalize=True)
    best = max(range(len(texts)), key=lambda i: float(vectors[0] @ vectors[i + 1]))
    assert hits[0].endswith(texts[best]) and texts[best] == "A small cat is playing."
    page.save_screenshot(os.path.join(shots, "similar.png"))
    use(page, "minilm", "attention")
    page.find_element(By.ID, "attention-run").click()
    WebDriverWait(page, 30).until(lambda b: b.find_element(By.ID, "attention-canvas").get_attribute("data-cells"))
    from bertlab.inference.attention import attention_weights
    text = page.find_element(By.ID, "attention-text").get_attribute("value")
    tokens, _ = attention_weights(m.model, m.tokenizer, text, -1)
    canvas = page.find_element(By.ID, "attention-canvas")
    assert canvas.get_attribute("data-cells") == str(len(tokens) ** 2)  # one cell per (query, key) pair
    assert canvas.size["width"] > 300
    page.save_screenshot(os.path.join(shots, "attention.png"))


def test_fill_classify_tag_answer_translate(page, loaded, shots):
    from bertlab.finetune.predict import examples_from_inputs, predict_examples
    from bertlab.inference.fill_mask import fill_mask
    use(page, "mlm", "fill-mask")
    page.find_element(By.ID, "fill-run").click()
    m = loaded["mlm"]
    top = fill_mask(m.model, m.tokenizer, ["the cat [MASK] on the mat ."], 5)[0][0][0]
    assert wait_text(page, "fill-out").startswith(f"[MASK] 1: {top.token} {top.probability:.4f}")

    def library(name, inputs):
        m = loaded[name]
        task = task_from_state(m)
        return predict_examples(task, m.model, m.tokenizer, examples_from_inputs(task, inputs))[0]

    use(page, "sentiment", "classify")
    page.find_element(By.ID, "classify-run").click()
    row = wait_text(page, "classify-out")
    assert row.startswith("a good film " + library("sentiment", [{"text": "a good film"}])["label"])
    use(page, "tagger", "ner")
    page.find_element(By.ID, "ner-run").click()
    tags = library("tagger", [{"text": "peter lives in paris"}])["tags"]
    wait_text(page, "ner-out")
    shown = [(span.get_attribute("textContent"), span.find_element(By.TAG_NAME, "b").text)
             for span in page.find_elements(By.CSS_SELECTOR, "#ner-out .tag")]
    assert shown == [(word + tag, tag) for word, tag in zip("peter lives in paris".split(), tags)]
    use(page, "reader", "qa")
    page.find_element(By.ID, "qa-run").click()
    answer = library("reader", [{"question": "where does peter live ?", "context": "peter lives in paris ."}])["answer"]
    assert wait_text(page, "qa-out").startswith(answer or "(no answer)")
    page.save_screenshot(os.path.join(shots, "qa.png"))
    use(page, "translator", "translate")
    page.find_element(By.ID, "translate-run").click()
    assert wait_text(page, "translate-out") is not None


def test_generate_streams_into_the_page_and_errors_are_shown(page, loaded, shots):
    from bertlab.inference.generate import SamplingOptions, generate
    use(page, "gpt", "generate")
    type_into(page, "generate-prompt", "the cat")
    type_into(page, "generate-n", "30")
    page.find_element(By.ID, "generate-run").click()
    WebDriverWait(page, 30).until(lambda b: b.find_element(By.ID, "generate-out").get_attribute("data-done") == "true")
    m = loaded["gpt"]
    ids = generate(m.model, [m.tokenizer.encode("the cat")], SamplingOptions(max_new_tokens=30), prepack=False)[0]
    assert page.find_element(By.ID, "generate-out").get_attribute("textContent") == "the cat" + m.tokenizer.decode(ids)
    page.save_screenshot(os.path.join(shots, "generate.png"))
    use(page, "mlm", "fill-mask")
    type_into(page, "fill-text", "a text without a mask")
    page.find_element(By.ID, "fill-run").click()
    assert wait_text(page, "error").startswith("422: ") and "no [MASK] in the text" in page.find_element(By.ID, "error").text
