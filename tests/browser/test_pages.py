"""The report's counterexample viewer and ``conq explore`` in a real browser (headless Chromium):
the upstream-flag-order counterexample of consumer lists (1,902 states) stepped through, the
changed field shown; the explorer walked to the same violation by clicks, and by its button."""

from __future__ import annotations

import pytest

from conq.html_report import HtmlReport
from conq.model.engines.explorer import explore
from conq.model.engines.registry import load_model

#: the counterexample of no-lost-wakeup under upstream's flag order: c0's IO thread tells the
#: queue it wants no work before writing its flag; the publisher, seeing c0's flag still set and
#: c0 of higher priority, notifies nobody; c1 is never told of m0
FLAG_ORDER = ['enqueue(0)', 'suspend(0, "flow")', 'set_notify_work_desired(0, false)', 'notify_consumers(0)',
              'target_flag(0, false)']
WAIT = 30  # seconds: a safety net for a loaded machine; every wait ends as soon as its condition holds


def _wait(driver, condition, what: str):
    """Wait until ``condition`` holds.  The page re-renders a state's table when an answer comes
    in, so an element found a moment before may be replaced: a stale element is one more poll,
    not a failure (the verdict never depends on how fast the browser is)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, poll_frequency=0.05, ignored_exceptions=(StaleElementReferenceException,)).until(
        condition, message=what)


def test_report_viewer_steps_through_the_flag_order_counterexample(tmp_path, browser, screenshot):
    from selenium.webdriver.common.by import By

    ex = explore(load_model("consumer-lists", "upstream-flag-order", {}))
    report = HtmlReport("conq check consumer-lists --config upstream-flag-order")
    report.add_exploration(ex, "consumer-lists / upstream-flag-order", expected=[v.prop.name for v in ex.violations])
    page = report.write(tmp_path / "index.html")
    browser.get(page.as_uri())
    assert browser.find_element(By.ID, "headline").text == "1 check, as expected"
    viewer = browser.find_element(By.CSS_SELECTOR, ".cx[id*='no-lost-wakeup']")
    assert viewer.get_attribute("data-current") == "0"
    labels = [li.find_element(By.TAG_NAME, "code").text for li in viewer.find_elements(By.CSS_SELECTOR, "ol.cx-steps li")]
    assert labels[:len(FLAG_ORDER)] == FLAG_ORDER and labels[-1] == "idle()"
    nxt = viewer.find_element(By.CSS_SELECTOR, ".cx-next")
    for _ in range(3):
        nxt.click()
    assert viewer.get_attribute("data-current") == "3"
    assert viewer.find_element(By.CSS_SELECTOR, ".cx-step-head").text == "3. c0 IO thread → c0: set_notify_work_desired(0, false)"
    changed = viewer.find_elements(By.CSS_SELECTOR, ".part[data-part='c0'] td.changed")
    assert {(td.get_attribute("data-field"), td.text) for td in changed} == {("node", '"not-interested"'), ("io", '"desire-half-done"')}
    # untouched parts show nothing changed
    assert not viewer.find_elements(By.CSS_SELECTOR, ".part[data-part='c1'] td.changed")
    browser.execute_script("arguments[0].scrollIntoView()", viewer)
    screenshot(browser, "step3")
    # the slider goes to the last step: the cycle
    browser.execute_script("var s = arguments[0]; s.value = s.max; s.dispatchEvent(new Event('input'));",
                           viewer.find_element(By.CSS_SELECTOR, "input.cx-slider"))
    assert viewer.find_element(By.CSS_SELECTOR, ".cx-step-head").text.startswith("↺ cycle")
    screenshot(browser, "cycle")


@pytest.fixture
def explorer():
    from conq.explorer_app import Server, Session

    server = Server(Session(load_model("consumer-lists", "upstream-flag-order", {}))).start()
    try:
        yield server
    finally:
        server.stop()
        assert not server.thread.is_alive()


def _labels_of_actions(driver):
    from selenium.webdriver.common.by import By

    return [b.get_attribute("data-label") for b in driver.find_elements(By.CSS_SELECTOR, "#actions button.action")]


def test_explorer_reaches_the_violation_by_clicks(browser, screenshot, explorer):
    from selenium.webdriver.common.by import By

    browser.get(explorer.url)
    _wait(browser, lambda d: _labels_of_actions(d), "the initial state's actions")
    for k, label in enumerate(FLAG_ORDER, 1):
        before = browser.find_element(By.TAG_NAME, "body").get_attribute("data-state")
        _wait(browser, lambda d: label in _labels_of_actions(d), f"action {label} enabled")
        browser.find_element(By.CSS_SELECTOR, f"#actions button[data-label='{label}']").click()
        _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state") != before, f"step {k}")
    # the state of the lost wake-up: m0 available, c0 wants no work, c1 Interested and never notified
    assert browser.find_element(By.ID, "position").text == f"step {len(FLAG_ORDER)} of {len(FLAG_ORDER)}"
    cell = browser.find_element(By.CSS_SELECTOR, ".part[data-part='c0'] td[data-field='wants_work']")
    assert cell.text == "false" and "changed" in cell.get_attribute("class")
    assert browser.find_element(By.CSS_SELECTOR, ".part[data-part='m0'] td[data-field='']").text == '"available"'
    assert browser.find_element(By.CSS_SELECTOR, ".part[data-part='c1'] td[data-field='node']").text == '"interested"'
    clicked_state = browser.find_element(By.TAG_NAME, "body").get_attribute("data-state")
    screenshot(browser, "by-clicks")
    # the model check's counterexample ends in the same state, then loops (idle)
    button = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#violations button[data-property='no-lost-wakeup']"),
                   "the violations list")[0]
    button.click()
    _wait(browser, lambda d: d.find_element(By.ID, "step-head").text.startswith("↺ cycle"), "the counterexample's cycle")
    trail = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#trail li")]
    assert trail[-1] == "↺ environment: idle()" and len(trail) == len(FLAG_ORDER) + 2
    browser.find_element(By.ID, "back").click()
    _wait(browser, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state") == clicked_state or
          d.find_element(By.ID, "position").text.startswith(f"step {len(FLAG_ORDER)} "), "back one step")
    screenshot(browser, "counterexample")


def test_explorer_finds_a_state_by_a_field_value(browser, explorer):
    from selenium.webdriver.common.by import By

    browser.get(explorer.url)
    _wait(browser, lambda d: _labels_of_actions(d), "the initial state's actions")
    browser.find_element(By.ID, "search-field").send_keys("c1.node")
    browser.find_element(By.ID, "search-value").send_keys('"notified"')
    browser.find_element(By.CSS_SELECTOR, "#search button").click()
    _wait(browser, lambda d: d.find_element(By.ID, "message").text.startswith("found after"), "the search")
    cell = ".part[data-part='c1'] td[data-field='node']"
    _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, cell).text == '"notified"', "c1.node shown as notified")
