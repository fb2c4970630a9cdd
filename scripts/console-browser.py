"""The operator's console in headless Chromium (run by scripts/console-browser, which starts the server).

Seeds users through the public and admin APIs (and a purchase through the local App Store), then, in the browser:
the console is not served on the public listener; a wrong key is refused; the right key signs in; a user is found by
email and by App Store transaction id; their ledger pages through 250 entries in order; a grant made in the console
shows in the wallet through the public API and once as a `wallet` event on an open event stream, even after a double
submit; premium is set and ended; revoking sessions makes the user's token get 401; a POST without the CSRF token is
refused; an account is deleted after its id is typed; wrong keys end in 429; the key is in no page, URL or cookie; the
overview's spending shows AI calls one row per model, labels whole, and one account in the singular.
Screenshots of each page, desktop and 360 px wide, go to $SCREENSHOTS.
"""

import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

from playwright.sync_api import sync_playwright

STORE = os.environ["STORE"]
API = os.environ["API_URL"]
ADMIN = os.environ["ADMIN_URL"]
KEY = os.environ["ADMIN_KEY"]
APPSTORE = os.environ["APPSTORE_URL"]
SHOTS = os.environ["SCREENSHOTS"]
CHECKS = []


def check(condition, what):
    CHECKS.append(what)
    if not condition:
        raise AssertionError(f"[{STORE}] {what}")


def http(method, url, body=None, token=None, admin=False):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if admin:
        headers["Authorization"] = f"Bearer {KEY}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        text = error.read().decode()
        return error.code, (json.loads(text) if text.startswith("{") else text)


def guest():
    status, tokens = http("POST", f"{API}/v1/auth/guest", {"deviceId": f"console-{uuid.uuid4()}"})
    check(status in (200, 201), f"guest sign-in: {status}")
    return tokens


def grant(user_id, amount, reason):
    status, body = http("POST", f"{ADMIN}/admin/v1/users/{user_id}/grants", {"amount": amount, "reason": reason}, admin=True)
    check(status == 201, f"admin grant: {status} {body}")


class EventStream:
    """GET /v1/sync/events, read on a thread: the `wallet` events' balances in order."""

    def __init__(self, token):
        self.balances = []
        self.opened = threading.Event()
        request = urllib.request.Request(f"{API}/v1/sync/events", headers={"Authorization": f"Bearer {token}"})
        self.response = urllib.request.urlopen(request, timeout=60)
        check(self.response.status == 200, "the event stream opens")
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        event = None
        try:
            for raw in self.response:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event == "wallet":
                    self.balances.append(json.loads(line[5:])["wallet"]["balance"])
                    self.opened.set()
                elif line == "":
                    event = None
        except Exception:
            pass

    def wait_for(self, count, seconds=15):
        deadline = time.time() + seconds
        while len(self.balances) < count and time.time() < deadline:
            time.sleep(0.05)
        return list(self.balances)


LONG_MODEL = "a-model-whose-name-is-longer-than-any-cut-was"
AI_CALLS = {"chat": 3, LONG_MODEL: 2}


def seed():
    people = {}
    ledger = guest()
    for n in range(250):
        grant(ledger["userId"], 1, f"seed {n + 1}")
    people["ledger"] = ledger
    account = guest()
    email = f"console-{uuid.uuid4().hex[:10]}@example.com"
    status, body = http("POST", f"{API}/v1/auth/link", {"email": email, "password": "correct horse battery"}, token=account["accessToken"])
    check(status == 200, f"link: {status} {body}")
    account["email"] = email
    grant(account["userId"], 40, "welcome")
    people["account"] = account
    buyer = guest()
    status, bought = http("POST", f"{APPSTORE}/purchase", {"productId": "com.example.oracle.tokens100", "send": False})
    check(status == 200, f"dev-appstore purchase: {status} {bought}")
    status, body = http("POST", f"{API}/v1/purchases/apple", {"signedTransaction": bought["signedTransaction"]}, token=buyer["accessToken"])
    check(status in (200, 201), f"redeem: {status} {body}")
    buyer["transactionId"] = bought["transactionId"]
    buyer["orderId"] = bought["orderId"]
    # The customer asks Apple for a refund: Apple's consumption request, answered by the server from the ledger.
    status, asked = http("POST", f"{APPSTORE}/transactions/{bought['transactionId']}/consumption-request",
                         {"reason": "UNINTENDED_PURCHASE", "send": False})
    check(status == 200, f"dev-appstore consumption request: {status} {asked}")
    status, body = http("POST", f"{API}/v1/webhooks/appstore", {"signedPayload": asked["notification"]["signedPayload"]})
    check(status == 200, f"the webhook took the consumption request: {status} {body}")
    people["buyer"] = buyer
    people["doomed"] = guest()
    spender = guest()
    grant(spender["userId"], 1000, "ai budget")
    for model, calls in AI_CALLS.items():
        for n in range(calls):
            body = {"model": model, "messages": [{"role": "user", "content": f"question {n}"}], "max_tokens": 8}
            status, answer = http("POST", f"{API}/v1/ai/chat/completions", body, token=spender["accessToken"])
            check(status == 200, f"AI call on {model}: {status} {answer}")
    return people


def main():
    people = seed()
    seen_urls = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=["--no-sandbox"])
        desktop = browser.new_context(viewport={"width": 1280, "height": 900})
        page = desktop.new_page()
        page.on("request", lambda request: seen_urls.append(request.url))
        mobile_context = browser.new_context(viewport={"width": 360, "height": 740}, device_scale_factor=2, is_mobile=True)
        mobile = mobile_context.new_page()
        mobile.on("request", lambda request: seen_urls.append(request.url))
        pages_seen = []

        def shot(name):
            """Screenshots the desktop page, then the same URL at 360 px (signed in with the same cookie)."""
            pages_seen.append(page.content())
            page.screenshot(path=f"{SHOTS}/{name}-desktop.png", full_page=True)
            mobile_context.add_cookies(desktop.cookies())
            mobile.goto(page.url)
            pages_seen.append(mobile.content())
            width = mobile.evaluate("document.documentElement.scrollWidth")
            check(width <= 362, f"{name} fits 360 px (scroll width {width})")
            mobile.screenshot(path=f"{SHOTS}/{name}-360.png", full_page=True)

        # Not on the public listener.
        answer = page.goto(f"{API}/")
        check(answer.status == 404, f"the public listener does not serve the console: {answer.status}")
        answer = page.goto(f"{API}/console/sign-in")
        check(answer.status == 404, "nor its sign-in")

        # Sign in: a wrong key refused, then the key.
        page.goto(f"{ADMIN}/")
        check(page.url.endswith("/console/sign-in"), f"signed out, / leads to the sign-in form: {page.url}")
        shot("sign-in")
        page.fill("#key", "not-the-key")
        with page.expect_response(lambda r: r.url.endswith("/console/sign-in") and r.request.method == "POST") as info:
            page.click("button[type=submit]")
        check(info.value.status == 401, f"a wrong key is refused: {info.value.status}")
        check("That is not the admin key." in page.content(), "the form says so")
        page.fill("#key", KEY)
        page.click("button[type=submit]")
        page.wait_for_url(f"{ADMIN}/")
        check(page.locator("h1").inner_text() == "Overview", "signed in: the overview")
        cookie = next(c for c in desktop.cookies() if c["name"] == "tally_console")
        check(cookie["httpOnly"] and cookie["sameSite"] == "Strict", f"the session cookie is HttpOnly, SameSite=Strict: {cookie}")
        check(KEY not in cookie["value"], "the cookie is not the key")
        check(page.locator("svg").count() >= 4, "the overview has its SVG charts")
        spending = page.locator("section", has=page.locator("h2", has_text="Spending by action"))
        rows = [[cell.inner_text() for cell in row.locator("td").all()] for row in spending.locator("tbody tr").all()]
        for model, calls in AI_CALLS.items():
            check([f"AI {model}", str(calls)] in [row[:2] for row in rows], f"one spending row for model {model}, {calls} calls: {rows}")
        check(len(rows) == len(AI_CALLS), f"no row is a single call: {rows}")
        labels = [text.text_content() for text in spending.locator("svg text").all()]
        check(f"AI {LONG_MODEL}" in labels, f"the chart names the long model whole: {labels}")
        users = page.locator(".card", has=page.locator("h2", has_text=re.compile(r"^Users$"))).inner_text()
        check("1 account" in users and "1 accounts" not in users, f"one account in the singular: {users}")
        shot("overview")

        # Find by email, then by transaction id.
        account, buyer, ledger = people["account"], people["buyer"], people["ledger"]
        page.fill("#q", account["email"])
        page.click("form.find button")
        page.wait_for_url(re.compile(r".*/console/users/" + account["userId"]))
        check(account["email"] in page.locator("h1").inner_text(), "found by email")
        page.goto(f"{ADMIN}/console/users")
        shot("users")
        page.fill("#q", buyer["transactionId"])
        page.click("form.find button")
        page.wait_for_url(re.compile(r".*/console/users/" + buyer["userId"]))
        check(buyer["transactionId"] in page.content(), "found by transaction id: the purchase is listed")
        check(page.locator("#balance").inner_text() == "100", "the purchase's 100 tokens")

        # Find by the order id of the customer's receipt (asked of Apple's API), then the purchase's timeline.
        page.goto(f"{ADMIN}/console/users")
        page.fill("#q", buyer["orderId"])
        page.click("form.find button")
        page.wait_for_url(re.compile(r".*/console/users/" + buyer["userId"]))
        page.click(f"a[href='/console/purchases/{buyer['transactionId']}']")
        page.wait_for_url(re.compile(r".*/console/purchases/" + buyer["transactionId"]))
        check(page.locator("#spent").inner_text().startswith("0 of 100 tokens"), f"nothing spent: {page.locator('#spent').inner_text()}")
        for _ in range(100):  # the answer is sent by the server's own service, at once
            statuses = page.locator("#consumption-requests .request-status").all_inner_texts()
            if statuses and statuses[0].startswith("sent"):
                break
            time.sleep(0.1)
            page.reload()
        check(statuses and statuses[0].startswith("sent"), f"the refund request was answered: {statuses}")
        sent = page.locator("#consumption-requests .answer").all_inner_texts()
        check(sent == ["0.0 % consumed, DELIVERED, sample: yes, no preference"], f"what was sent, field by field: {sent}")
        check("UNINTENDED_PURCHASE" in page.content(), "Apple's reason")
        shot("purchase")

        # The ledger, 250 entries in pages, newest first, each id once.
        page.goto(f"{ADMIN}/console/users/{ledger['userId']}")
        ids, reasons = [], []
        while True:
            rows = page.locator("#ledger tbody tr")
            for i in range(rows.count()):
                cells = rows.nth(i).locator("td")
                ids.append(int(cells.nth(0).inner_text()))
                reasons.append(cells.nth(6).inner_text())
            older = page.locator("a[rel=next]")
            if older.count() == 0:
                break
            older.click()
            page.wait_for_load_state()
        check(len(ids) == 250, f"250 entries through the pages: {len(ids)}")
        check(ids == sorted(ids, reverse=True) and len(set(ids)) == 250, "newest first, none twice")
        check(reasons == [f"seed {n}" for n in range(250, 0, -1)], "every entry with its reason, in order")

        # A grant in the console: in the wallet through the public API, once on the event stream, after a double submit.
        page.goto(f"{ADMIN}/console/users/{account['userId']}")
        stream = EventStream(account["accessToken"])
        check(stream.wait_for(1) == [40], f"the stream opens with the wallet: {stream.balances}")
        page.fill("#amount", "7")
        page.fill("#reason", "console grant")
        grant_form = page.locator("form[action$='/grant']")
        grant_form.locator("input[name=confirm]").check()
        fields = {name: grant_form.locator(f"input[name={name}]").input_value() for name in ["csrf", "idempotency"]}
        shot_url = page.url
        grant_form.locator("button").dblclick()
        page.wait_for_url(re.compile(r".*done=grant"))
        again = page.request.post(
            f"{ADMIN}/console/users/{account['userId']}/grant",
            form={**fields, "amount": "7", "reason": "console grant", "confirm": "yes"}, max_redirects=0)
        check(again.status == 303 and "granted-before" in again.headers["location"], f"the same form again replays: {again.status}")
        status, wallet = http("GET", f"{API}/v1/wallet", token=account["accessToken"])
        check(status == 200 and wallet["balance"] == 47, f"one grant of 7 in the wallet: {wallet}")
        check(stream.wait_for(2) == [40, 47], f"one wallet event: {stream.balances}")
        time.sleep(1)
        check(stream.balances == [40, 47], f"and no second one: {stream.balances}")
        check(page.locator("#balance").inner_text() == "47", "the page shows the new balance")
        page.goto(shot_url)
        shot("user")

        # Premium set, then ended.
        premium = page.locator("form[action$='/premium']")
        premium.locator("#until").fill("2031-03-04")
        premium.locator("input[name=confirm]").check()
        premium.locator("button[value=set]").click()
        page.wait_for_url(re.compile(r".*done=premium"))
        check("2031-03-05 00:00 UTC" in page.locator("#premium").inner_text(), f"premium set: {page.locator('#premium').inner_text()}")
        status, me = http("GET", f"{API}/v1/me", token=account["accessToken"])
        check(me.get("premiumUntil", "").startswith("2031-03-05T00:00:00"), f"premium through the API: {me}")
        premium = page.locator("form[action$='/premium']")
        premium.locator("input[name=confirm]").check()
        premium.locator("button[value=end]").click()
        page.wait_for_url(re.compile(r".*done=premium"))
        check(page.locator("#premium").inner_text() == "not premium", "premium ended")
        status, me = http("GET", f"{API}/v1/me", token=account["accessToken"])
        check(me.get("premiumUntil") is None, f"ended through the API: {me}")

        # A POST without the CSRF token is refused (and one with a forged token).
        for form in [{"amount": "5", "reason": "forged", "confirm": "yes", "idempotency": "x1"},
                     {"amount": "5", "reason": "forged", "confirm": "yes", "idempotency": "x2", "csrf": "forged"}]:
            refused = page.request.post(f"{ADMIN}/console/users/{account['userId']}/grant", form=form, max_redirects=0)
            check(refused.status == 403, f"no CSRF token, no grant: {refused.status}")
        status, wallet = http("GET", f"{API}/v1/wallet", token=account["accessToken"])
        check(wallet["balance"] == 47, "nothing granted by them")

        # Revoke every session: the user's token gets 401.
        revoke = page.locator("form[action$='/revoke-sessions']")
        revoke.locator("input[name=confirm]").check()
        revoke.locator("button").click()
        page.wait_for_url(re.compile(r".*done=revoked"))
        status, _ = http("GET", f"{API}/v1/wallet", token=account["accessToken"])
        check(status == 401, f"the revoked token gets 401: {status}")

        # Delete an account after typing its id.
        doomed = people["doomed"]
        page.goto(f"{ADMIN}/console/users/{doomed['userId']}")
        page.fill("#typed", doomed["userId"])
        page.locator("form[action$='/delete'] button").click()
        page.wait_for_url(re.compile(r".*/console/users\?done=deleted"))
        status, _ = http("GET", f"{ADMIN}/admin/v1/users/{doomed['userId']}", admin=True)
        check(status == 404, "deleted")

        # The audit page and GET /admin/v1/audit.
        page.goto(f"{ADMIN}/console/audit")
        text = page.locator("#audit").inner_text()
        for action in ["grant", "premium", "revoke_sessions", "delete_user"]:
            check(action in text, f"the audit page lists {action}")
        shot("audit")
        status, audit = http("GET", f"{ADMIN}/admin/v1/audit?limit=100", admin=True)
        console_grants = [row for row in audit["items"] if row["action"] == "grant" and row["userId"] == account["userId"]
                          and row["operatorSession"].startswith("console-")]
        check(len(console_grants) == 1, f"one audited console grant: {console_grants}")
        check(console_grants[0]["before"] == "balance=40" and console_grants[0]["after"] == "balance=47 (+7: console grant)",
              f"before and after: {console_grants[0]}")

        # Sign out; then wrong keys until the address is limited (the right key too).
        page.goto(f"{ADMIN}/")
        page.locator("header form button").click()
        page.wait_for_url(re.compile(r".*/console/sign-in"))
        statuses = []
        for attempt in range(6):
            page.fill("#key", f"wrong-{attempt}")
            with page.expect_response(lambda r: r.url.endswith("/console/sign-in") and r.request.method == "POST") as info:
                page.click("button[type=submit]")
            statuses.append(info.value.status)
            if info.value.status == 429:
                break
        check(statuses[-1] == 429 and set(statuses[:-1]) == {401}, f"wrong keys end in 429: {statuses}")
        page.fill("#key", KEY)
        with page.expect_response(lambda r: r.url.endswith("/console/sign-in") and r.request.method == "POST") as info:
            page.click("button[type=submit]")
        check(info.value.status == 429, "the right key too, while limited")
        shot("rate-limited")
        browser.close()

    check(all(KEY not in html for html in pages_seen), f"the key is in none of the {len(pages_seen)} pages")
    check(all(KEY not in url for url in seen_urls), f"nor in any of the {len(seen_urls)} URLs the browser asked for")
    print(f"[console-browser.py {STORE}] {len(CHECKS)} checks passed; screenshots in {SHOTS}")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        sys.exit(1)
