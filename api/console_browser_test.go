package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"taskledger/node/nodetest"
	"taskledger/wire"
)

// The console is driven in a real browser (Debian's chromium, headless) at
// the three sizes an operator uses: a desk and two phones. At each it signs
// in, reads a list with tasks in every state, opens a detail, cancels a
// PENDING task, requests a safe stop of a RUNNING one (and sees CANCELED
// without a reload once the device acknowledges through the API), recovers
// a task whose lease expired (manual test clock), registers and revokes a
// device; after each step the page must not overflow, every control must
// be a 44×44 tap target on phones, text at least 14 px, and no console
// error may have been logged; no token may reach the URL or local storage.
//
// Screenshots of every view at every size are saved in the folder named by
// TASKLEDGER_SCREENSHOTS (default: a temporary folder), printed by the test.

var viewports = []struct {
	name          string
	width, height int64
	phone         bool
}{
	{"desk-1440x900", 1440, 900, false},
	{"phone-390x844", 390, 844, true},
	{"phone-360x800", 360, 800, true},
}

func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the console's browser tests need Chromium: apt-get install -y chromium")
	return ""
}

// browser starts one headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return actx
}

// page is one tab of the browser, with the console errors it logged.
type page struct {
	t      *testing.T
	ctx    context.Context
	n      *nodetest.Node
	shots  string
	size   string
	phone  bool
	mu     sync.Mutex
	errors []string
}

func openPage(t *testing.T, actx context.Context, n *nodetest.Node, shots, size string, w, h int64, phone bool) *page {
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute) // a hang guard for the whole page
	t.Cleanup(cancelT)
	p := &page{t: t, ctx: ctx, n: n, shots: shots, size: size, phone: phone}
	listen := func(ev any) {
		p.mu.Lock()
		defer p.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.errors = append(p.errors, "exception: "+e.ExceptionDetails.Text+" "+e.ExceptionDetails.URL)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				p.errors = append(p.errors, "console.error: "+strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError && !expectedNetworkError(e.Entry) {
				p.errors = append(p.errors, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	}
	emulate := chromedp.EmulateViewport(w, h)
	if phone {
		emulate = chromedp.EmulateViewport(w, h, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2))
	}
	p.run(emulate) // opens the tab
	if err := chromedp.Listen(ctx, listen); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	p.run(chromedp.Navigate(n.URL + "/"))
	return p
}

// expectedNetworkError: the console's refused API calls (a 409 shown to the
// operator as an error code) are logged by Chromium as failed resources;
// they are answers the page handles, not page errors.
func expectedNetworkError(e *log.Entry) bool {
	return e.Source == log.EntrySourceNetwork && strings.Contains(e.URL, "/api/v1/")
}

func (p *page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: browser: %v", p.size, err)
	}
}

// eval evaluates a JavaScript expression into out (its JSON value).
func (p *page) eval(js string, out any) {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](js))
	if err == nil {
		err = json.Unmarshal(v, out)
	}
	if err != nil {
		p.t.Fatalf("%s: evaluate: %v", p.size, err)
	}
}

// waitFor waits until the JavaScript expression is true (guarded).
func (p *page) waitFor(what, js string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 2000)`))
		p.t.Fatalf("%s: waiting for %s: %v\npage text:\n%s", p.size, what, err, body)
	}
}

// jsName finds the visible element of a role with an accessible name (its
// aria-label, its label's text, or its own text), marks it, and returns
// the mark's selector.
const findJS = `(function(role, name){
  const sel = {button: 'button', tab: '[role=tab]', textbox: 'input,textarea', combobox: 'select'}[role];
  const nameOf = (e) => {
    if (e.getAttribute('aria-label')) return e.getAttribute('aria-label').trim();
    if (e.labels && e.labels.length) return [...e.labels[0].childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
    return e.textContent.trim();
  };
  const visible = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && !e.closest('[hidden]'); };
  const dlg = document.querySelector('dialog[open]');
  const all = [...(dlg || document).querySelectorAll(sel)].filter(e => visible(e) && nameOf(e) === name);
  if (all.length === 0) return '';
  const m = 'pick' + Math.random().toString(36).slice(2);
  all[0].setAttribute('data-pick', m);
  return '[data-pick="' + m + '"]';
})`

func (p *page) find(role, name string) string {
	p.t.Helper()
	var sel string
	p.waitFor(role+" "+name, fmt.Sprintf(`%s(%q, %q) !== ''`, findJS, role, name))
	p.eval(fmt.Sprintf(`%s(%q, %q)`, findJS, role, name), &sel)
	if sel == "" {
		p.t.Fatalf("%s: no %s named %q", p.size, role, name)
	}
	return sel
}

// click clicks the element with the mouse. The page may re-render a list
// between finding and clicking (a live update), so a click whose element
// went away is retried on the element found again.
func (p *page) click(role, name string) {
	p.t.Helper()
	p.clickFound(role+" "+name, func() string { return p.find(role, name) })
}

// clickSel clicks the element a CSS selector names, as click does.
func (p *page) clickSel(what, css string) {
	p.t.Helper()
	p.clickFound(what, func() string {
		p.waitFor(what, fmt.Sprintf(`document.querySelector(%q) !== null`, css))
		return css
	})
}

func (p *page) clickFound(what string, find func() string) {
	p.t.Helper()
	var err error
	for range 10 {
		sel := find()
		ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
		err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return
		}
	}
	p.t.Fatalf("%s: click %s: %v", p.size, what, err)
}

func (p *page) fill(name, value string) {
	p.t.Helper()
	sel := p.find("textbox", name)
	var cleared bool
	p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = ''; return true; })()`, sel), &cleared)
	p.run(chromedp.SendKeys(chromedp.CSS(sel), value))
}

// openTask opens a task's detail from the list and waits until it shows.
// A live update may re-render the list between the mouse's move and its
// press, so the click is repeated until the detail opens.
func (p *page) openTask(id string) {
	p.t.Helper()
	opened := fmt.Sprintf(`!document.querySelector('#view-task').hidden && document.querySelector('#task-title').title === %q && document.querySelector('#history tbody tr') !== null`, id)
	for range 5 {
		p.click("button", "Task "+id)
		ctx, cancel := context.WithTimeout(p.ctx, 4*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](opened, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		var shown string // the task whose detail is open, "" for none
		p.eval(`document.querySelector('#view-task').hidden ? '' : document.querySelector('#task-title').title`, &shown)
		if shown == id { // it opened, still loading: wait for it
			break
		}
		if shown != "" { // the press landed on another row
			p.click("button", "← Tasks")
		}
	}
	p.waitFor("the detail of "+id, opened)
}

func (p *page) text() string {
	var s string
	p.eval(`document.body.innerText`, &s)
	return s
}

func (p *page) shot(view string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot()) // the viewport, as the operator sees it
	if err != nil {
		p.t.Fatalf("%s: screenshot: %v", p.size, err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, p.size+"-"+view+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// checkLayout asserts the layout rules and that no error was logged.
func (p *page) checkLayout(view string) {
	p.t.Helper()
	var r struct {
		Overflow  int      `json:"overflow"`
		Small     []string `json:"small"`
		Tiny      []string `json:"tiny"`
		URL       string   `json:"url"`
		Local     int      `json:"local"`
		Cookie    string   `json:"cookie"`
		SessionOK bool     `json:"sessionOK"`
		Shown     []string `json:"shown"`
	}
	p.eval(`(() => {
	  const vis = (e) => { const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
	  const small = [...document.querySelectorAll('button, input, select, textarea, [role=tab]')].filter(vis)
	    .filter(e => { const b = e.getBoundingClientRect(); return b.width < 43.5 || b.height < 43.5; })
	    .map(e => (e.getAttribute('aria-label') || e.textContent || e.name || e.tagName).trim().slice(0, 40));
	  const tiny = [...document.querySelectorAll('body *')].filter(e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
	    .filter(vis).filter(e => parseFloat(getComputedStyle(e).fontSize) < 14).map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 30));
	  const keys = Object.keys(sessionStorage);
	  return {overflow: document.documentElement.scrollWidth - window.innerWidth, small, tiny, url: location.href,
	    local: localStorage.length, cookie: document.cookie, sessionOK: keys.every(k => k === 'taskledger.adminToken'),
	    shown: [...document.querySelectorAll('[hidden]')].filter(e => getComputedStyle(e).display !== 'none').map(e => e.id || e.tagName)};
	})()`, &r)
	if len(r.Shown) > 0 {
		p.t.Errorf("%s %s: hidden elements are displayed: %q", p.size, view, r.Shown)
	}
	if r.Overflow > 0 {
		p.t.Errorf("%s %s: the page is %d px wider than the viewport", p.size, view, r.Overflow)
	}
	if p.phone && len(r.Small) > 0 {
		p.t.Errorf("%s %s: tap targets under 44×44 px: %q", p.size, view, r.Small)
	}
	if len(r.Tiny) > 0 {
		p.t.Errorf("%s %s: text under 14 px: %q", p.size, view, r.Tiny)
	}
	if strings.Contains(r.URL, p.n.AdminToken) || strings.Contains(r.URL, "tl") && strings.Contains(r.URL, "_") {
		p.t.Errorf("%s %s: a token in the URL %q", p.size, view, r.URL)
	}
	if r.Local != 0 || r.Cookie != "" || !r.SessionOK {
		p.t.Errorf("%s %s: storage beyond the admin token in sessionStorage (local %d, cookie %q)", p.size, view, r.Local, r.Cookie)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errors) > 0 {
		p.t.Errorf("%s %s: console errors: %q", p.size, view, p.errors)
		p.errors = nil
	}
}

// fleet is the data one viewport's run acts on: a task in every state.
type fleet struct {
	pending, cancelMe, claimed, running, stopMe, expired, waiting, succeeded, failed, canceled, created string
	story, storyDevice, storyName                                                                       string // a full lifecycle on one device
	stopDev                                                                                             *nodetest.Device
	stopTok, stopExec                                                                                   string
	keepAlive                                                                                           func()
}

// registerNamed registers a device with a name and reports it ready.
func registerNamed(t *testing.T, n *nodetest.Node, name string) *nodetest.Device {
	t.Helper()
	r := n.Do("POST", "/api/v1/admin/devices", n.AdminToken, map[string]any{"owner_id": nodetest.NewKey(), "name": name}, nil)
	nodetest.Must(t, r, http.StatusCreated)
	m := r.JSON()
	d := &nodetest.Device{N: n, ID: m["device_id"].(string), OwnerID: m["owner_id"].(string), Token: m["token"].(string), Session: nodetest.NewKey()}
	nodetest.Must(t, d.Ready(), http.StatusOK)
	return d
}

func makeFleet(t *testing.T, n *nodetest.Node) *fleet {
	t.Helper()
	f := &fleet{}
	claim := func() (*nodetest.Device, string, string) {
		id := n.CreateTask(map[string]any{"job": "demo", "n": 1})
		d := n.ReadyDevice(t)
		got, tok, _ := d.MustClaim(t)
		if got != id {
			t.Fatalf("claimed %s, want the new task %s", got, id)
		}
		return d, id, tok
	}
	started := func() (*nodetest.Device, string, string, string) {
		d, id, tok := claim()
		return d, id, tok, d.MustStart(t, id, tok, 1, 2)
	}
	body := func(ex string, v uint64, extra map[string]any) map[string]any {
		m := map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": v}
		for k, x := range extra {
			m[k] = x
		}
		return m
	}
	_, f.claimed, _ = claim()
	// The story: created, authorized, claimed, started, heartbeats, completed,
	// its payload and last step carrying a right-to-left override.
	f.storyName = "phone-story-" + nodetest.NewKey()[:8] // names are printable ASCII: the bidi controls come in payloads, steps and reasons
	sd := registerNamed(t, n, f.storyName)
	f.story, f.storyDevice = n.CreateTask(map[string]any{"job": "story", "file": "invoice\u202Efdp.exe", "steps": []any{"open", "fill", "send"}}), sd.ID
	if got, stok, _ := sd.MustClaim(t); got != f.story {
		t.Fatalf("claimed %s, want the story %s", got, f.story)
	} else {
		n.Advance(3 * time.Second) // claim → start: 3 s
		sex := sd.MustStart(t, f.story, stok, 1, 2)
		for i := range 8 {
			nodetest.Must(t, sd.Call(f.story, "heartbeat", stok, map[string]any{"claim_generation": 1, "execution_id": sex, "step": fmt.Sprintf("step %d", i)}, ""), http.StatusOK)
		}
		n.Advance(5 * time.Second) // start → finish: 5 s
		nodetest.Must(t, sd.Call(f.story, "complete", stok, body(sex, 3, map[string]any{"result": map[string]any{"ok": true, "sent": "invoice\u202Efdp.exe"}}), ""), http.StatusOK)
	}
	d, id, tok, ex := started()
	f.succeeded = id
	nodetest.Must(t, d.Call(id, "complete", tok, body(ex, 3, map[string]any{"result": map[string]any{"ok": true}}), ""), http.StatusOK)
	d, id, tok, ex = started()
	f.failed = id
	nodetest.Must(t, d.Call(id, "fail", tok, body(ex, 3, map[string]any{"reason_code": "exit_7", "detail": "the job exited 7 \u2067in\u2069 \u202Bcopy\u202C"}), ""), http.StatusOK)
	wd, wid, wtok, wex := started()
	f.waiting = wid
	nodetest.Must(t, wd.Call(wid, "await-confirmation", wtok, body(wex, 3, map[string]any{"reason": "confirm on the phone"}), ""), http.StatusOK)
	_, f.expired, _, _ = started()
	var rd *nodetest.Device
	rd, f.running, tok, ex = started()
	beat := func(d *nodetest.Device, id, tok, ex string) {
		nodetest.Must(t, d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "working"}, ""), http.StatusOK)
	}
	// The running task has a screenshot; the pending one a reference image.
	nodetest.Must(t, n.Do("POST", "/api/v1/device/tasks/"+f.running+"/evidence", rd.Token, tinyPNG(t), map[string]string{
		"Idempotency-Key": nodetest.NewKey(), "X-Claim-Token": tok, "X-Claim-Generation": "1", "X-Execution-Id": ex,
		"X-Evidence-Kind": "screenshot", "X-Captured-At": "2026-03-01T10:00:00.123Z", "Content-Type": "image/png"}), http.StatusCreated)
	f.stopDev, f.stopMe, f.stopTok, f.stopExec = started()
	f.keepAlive = func() {
		beat(rd, f.running, tok, ex)
		beat(f.stopDev, f.stopMe, f.stopTok, f.stopExec)
		beat(wd, wid, wtok, wex)
	}
	f.canceled = n.CreateTask(map[string]any{"job": "never"})
	nodetest.Must(t, n.Cancel(f.canceled), http.StatusOK)
	f.cancelMe = n.CreateTask(map[string]any{"job": "to cancel"})
	f.pending = n.CreateTask(map[string]any{"job": "waits", "nested": map[string]any{"a": []any{1, 2}}})
	nodetest.Must(t, putReferenceImage(n, f.pending, tinyJPEG(t, 7), ""), http.StatusOK)
	// Let the "expired" execution's lease run out while the others live.
	n.Advance(60 * time.Second)
	f.keepAlive()
	n.Advance(31 * time.Second)
	return f
}

func TestConsoleInABrowser(t *testing.T) {
	shots := os.Getenv("TASKLEDGER_SCREENSHOTS")
	if shots == "" { // a folder of this run's own, kept as the test's artifact
		dir, err := os.MkdirTemp("", "taskledger-console-screenshots-")
		if err != nil {
			t.Fatal(err)
		}
		shots = dir
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	actx := browser(t)
	n := nodetest.Start(t)
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			f := makeFleet(t, n)
			defer func() { // the next size's fleet claims its own new tasks
				for _, id := range []string{f.pending, f.cancelMe, f.created} {
					if id != "" {
						n.Cancel(id)
					}
				}
			}()
			p := openPage(t, actx, n, shots, vp.name, vp.width, vp.height, vp.phone)
			consoleScenario(t, p, f)
		})
	}
}

func consoleScenario(t *testing.T, p *page, f *fleet) {
	n := p.n
	// Sign in: a wrong token is refused and not kept.
	p.waitFor("the sign-in form", `document.querySelector('#token') !== null && !document.querySelector('#view-signin').hidden`)
	p.checkLayout("signin")
	p.shot("signin")
	p.fill("Admin token", "tladm_wrong")
	p.click("button", "Sign in")
	p.waitFor("the refusal", `document.querySelector('#signin-error').textContent.includes('refused')`)
	var kept int
	p.eval(`sessionStorage.length`, &kept)
	if kept != 0 {
		t.Fatalf("a refused token was stored")
	}
	p.fill("Admin token", n.AdminToken)
	p.click("button", "Sign in")
	overviewScenario(t, p)
	p.click("tab", "Tasks")

	// The list: every state, with the expired lease flagged.
	p.waitFor("the task list", `document.querySelectorAll('#tasks tbody tr').length >= 10`)
	for _, id := range []string{f.pending, f.claimed, f.running, f.waiting, f.succeeded, f.failed, f.canceled, f.expired} {
		p.waitFor("row "+id, fmt.Sprintf(`!!document.querySelector('tr[data-task-id=%q]')`, id))
	}
	var rowStates map[string]string
	p.eval(`Object.fromEntries([...document.querySelectorAll('#tasks tbody tr')].map(r => [r.dataset.taskId, r.innerText]))`, &rowStates)
	for id, st := range map[string]string{f.pending: "PENDING", f.claimed: "CLAIMED", f.running: "RUNNING",
		f.waiting: "WAITING_CONFIRMATION", f.succeeded: "SUCCEEDED", f.failed: "FAILED", f.canceled: "CANCELED"} {
		if !strings.Contains(rowStates[id], st) || strings.Contains(rowStates[id], "lease expired") {
			t.Errorf("row of %s: %q, want %s", id, rowStates[id], st)
		}
	}
	if !strings.Contains(rowStates[f.expired], "RUNNING") || !strings.Contains(rowStates[f.expired], "lease expired") {
		t.Errorf("the expired RUNNING task is not flagged: %q", rowStates[f.expired])
	}
	p.checkLayout("tasks")
	p.shot("tasks")

	// Create a task from the console; a refused authorization shows the
	// API's code and changes nothing.
	p.click("button", "New task")
	p.fill("Payload (JSON object)", `{"job": "from the console", "n": 2}`)
	p.click("button", "Confirm")
	p.waitFor("the new task's detail", `!document.querySelector('#view-task').hidden && document.querySelector('#task-title').title.length === 36 && document.body.innerText.includes('from the console')`)
	var created string
	p.eval(`document.querySelector('#task-title').title`, &created)
	f.created = created
	if m := n.Task(created); m["state"] != "PENDING" || m["authorization"] == nil {
		t.Fatalf("created from the console: %v", m)
	}
	head := n.Head()
	p.click("button", "Authorize")
	p.fill("Authorization TTL (seconds)", "999999999")
	p.click("button", "Confirm")
	p.waitFor("the refusal's code", `document.querySelector('#dialog-error').textContent.startsWith('invalid_ttl')`)
	if n.Head() != head {
		t.Error("a refused authorization appended an event")
	}
	p.checkLayout("refused")
	p.shot("refused")
	p.click("button", "Back")
	p.click("button", "← Tasks")

	// A detail: readable, and never a token or hash.
	p.openTask(f.running)
	txt := p.text()
	for _, want := range []string{"Payload", "authorization", "Claim", "Execution", "History", "task.started", "task.claimed", "working"} {
		if !strings.Contains(txt, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	var html string
	p.eval(`document.documentElement.outerHTML`, &html)
	if strings.Contains(html, "token_sha256") || strings.Contains(html, f.stopTok) || strings.Contains(html, "nonce") {
		t.Error("the detail shows a token, hash or nonce")
	}
	p.waitFor("the evidence thumbnail", `[...document.querySelectorAll('#task-body img')].some(i => i.alt.startsWith('Evidence') && i.complete && i.naturalWidth > 0)`)
	p.checkLayout("detail")
	p.shot("detail")
	p.click("button", "← Tasks")
	p.openTask(f.pending)
	p.waitFor("the reference image", `[...document.querySelectorAll('#task-body img')].some(i => i.alt === 'Reference image' && i.complete && i.naturalWidth > 0)`)

	// Cancel a PENDING task.
	p.click("button", "← Tasks")
	p.openTask(f.cancelMe)
	p.click("button", "Cancel task")
	p.waitFor("the dialog", `document.querySelector('dialog[open]') !== null`)
	p.checkLayout("confirm")
	p.shot("confirm")
	p.click("button", "Confirm")
	p.waitFor("CANCELED", `document.querySelector('#task-summary .state') && document.querySelector('#task-summary .state').textContent === 'CANCELED'`)
	if st, _ := n.State(f.cancelMe); st != "CANCELED" {
		t.Errorf("cancel: the server says %s", st)
	}

	// Request a safe stop of a RUNNING task; the device's ack shows without a reload.
	p.click("button", "← Tasks")
	p.openTask(f.stopMe)
	p.click("button", "Request safe stop")
	p.click("button", "Confirm")
	p.waitFor("the cancel-requested flag", `document.querySelector('#task-summary .flag.cancel') !== null`)
	if n.Task(f.stopMe)["cancel_requested"] != true {
		t.Error("safe stop: cancel_requested not set on the server")
	}
	var marker string
	p.eval(`(window.__noReload = Math.random().toString(36))`, &marker)
	nodetest.Must(t, f.stopDev.Call(f.stopMe, "cancel-ack", f.stopTok, map[string]any{"claim_generation": 1,
		"execution_id": f.stopExec, "expected_version": 3}, ""), http.StatusOK)
	p.waitFor("CANCELED after the device's ack", `document.querySelector('#task-summary .state').textContent === 'CANCELED'`)
	var still string
	p.eval(`window.__noReload || ''`, &still)
	if still != marker {
		t.Error("the page reloaded to show the ack")
	}

	// Recover the task whose running lease expired.
	p.click("button", "← Tasks")
	p.openTask(f.expired)
	p.waitFor("the expired flag", `document.body.innerText.includes('lease expired')`)
	p.click("button", "Recover")
	p.click("button", "Confirm")
	p.waitFor("FAILED after recovery", `document.querySelector('#task-summary .state').textContent === 'FAILED'`)
	if st, _ := n.State(f.expired); st != "FAILED" {
		t.Errorf("recover: the server says %s", st)
	}
	p.storyFits("recovered", f.expired)

	// The story of a full lifecycle on one screen; bidi controls shown escaped.
	p.click("button", "← Tasks")
	p.openTask(f.story)
	p.storyFits("story", f.story)
	p.noBidi("story")
	// The provenance, opened: one row per event, each naming the fields it set.
	p.clickSel("the provenance", "#provenance summary")
	var prov []string
	p.eval(`[...document.querySelectorAll('#provenance tbody tr')].map(r => r.cells[0].innerText + ' | ' + r.cells[4].innerText)`, &prov)
	if len(prov) < 4 || !strings.Contains(strings.Join(prov, "\n"), "task.completed") {
		t.Errorf("%s: the provenance table: %q", p.size, prov)
	}
	for _, r := range prov {
		if strings.HasSuffix(strings.TrimSpace(r), "|") || strings.Count(r, "#") != 1 {
			t.Errorf("%s: a provenance row without its fields or with two events: %q", p.size, r)
		}
	}
	p.checkLayout("provenance")
	p.fullShot("provenance")
	p.click("button", "← Tasks")
	p.openTask(f.failed)
	p.waitFor("the failure detail", `document.querySelector('#task-body').innerText.includes('exit_7')`)
	p.noBidi("failed")
	if txt := p.text(); !strings.Contains(txt, `\u2067in\u2069 \u202Bcopy\u202C`) {
		t.Errorf("the failure detail is not shown escaped")
	}

	// Register a device: its token is shown once; then revoke it.
	p.click("tab", "Devices")
	p.waitFor("the device list", `document.querySelectorAll('#devices tbody tr').length > 0`)
	p.checkLayout("devices")
	p.shot("devices")
	p.click("button", "Register device")
	name := "console-" + p.size
	p.fill("Name", name)
	p.click("button", "Confirm")
	p.waitFor("the new token", `!document.querySelector('#new-token').hidden && document.querySelector('#new-token-value').textContent.startsWith('tldev_')`)
	var token string
	p.eval(`document.querySelector('#new-token-value').textContent`, &token)
	p.checkLayout("token")
	p.shot("token")
	var stored string
	p.eval(`JSON.stringify(sessionStorage) + JSON.stringify(localStorage) + location.href`, &stored)
	if strings.Contains(stored, token) {
		t.Error("the device token was stored or put in the URL")
	}
	p.click("button", "Done")
	p.waitFor("the token gone", `document.querySelector('#new-token').hidden && !document.body.innerText.includes('tldev_')`)
	var devID string
	p.waitFor("the new device's row", fmt.Sprintf(`[...document.querySelectorAll('#devices tbody tr')].some(r => r.innerText.includes(%q))`, name))
	p.eval(fmt.Sprintf(`[...document.querySelectorAll('#devices tbody tr')].find(r => r.innerText.includes(%q)).dataset.deviceId`, name), &devID)
	p.clickSel("the new device's Revoke device", fmt.Sprintf(`tr[data-device-id=%q] button[aria-label="Revoke device"]`, devID))
	p.click("button", "Confirm")
	p.waitFor("REVOKED", fmt.Sprintf(`document.querySelector('tr[data-device-id=%q]').innerText.includes('REVOKED')`, devID))
	var dev map[string]any
	if err := json.Unmarshal(n.Do("GET", nodetest.AdminPath+"/devices/"+devID, n.AdminToken, nil, nil).Body, &dev); err != nil || dev["status"] != "REVOKED" {
		t.Errorf("revoke: the server says %v (%v)", dev["status"], err)
	}
	p.checkLayout("devices-after")
	deviceScenario(t, p, f)

	// Sign out forgets the token.
	p.click("button", "Sign out")
	p.waitFor("the sign-in form again", `!document.querySelector('#view-signin').hidden && sessionStorage.length === 0`)
}

// fullShot saves the whole page (not only the viewport).
func (p *page) fullShot(view string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("%s: screenshot: %v", p.size, err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, p.size+"-"+view+"-full.png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// storyFits checks a task's detail once its provenance has loaded: at the
// desk size the whole page is at most two screens (1800 px) and the
// summary, claim, execution and outcome end above the fold; on phones the
// same parts come in that order in one column.
func (p *page) storyFits(view, id string) {
	p.t.Helper()
	p.waitFor("the provenance of "+id, fmt.Sprintf(`document.querySelector('#task-title').title === %q && document.querySelector('#provenance details') !== null && document.querySelector('#view-task [data-prov].prov') !== null`, id))
	var r struct {
		Height float64            `json:"height"`
		Fold   float64            `json:"fold"`
		Parts  map[string]float64 `json:"parts"`
		Bottom map[string]float64 `json:"bottom"`
		Left   map[string]float64 `json:"left"`
	}
	p.eval(`(() => {
	  const parts = {}, bottom = {}, left = {};
	  const at = (name, e) => { const b = e.getBoundingClientRect(); parts[name] = b.top + scrollY; bottom[name] = b.bottom + scrollY; left[name] = b.left; };
	  at('summary', document.querySelector('#task-summary'));
	  for (const c of document.querySelectorAll('#task-body > section')) at(c.querySelector('h2').textContent, c);
	  at('history', document.querySelector('#history'));
	  at('provenance', document.querySelector('#provenance'));
	  return {height: document.documentElement.scrollHeight, fold: innerHeight, parts, bottom, left};
	})()`, &r)
	p.t.Logf("%s %s: the detail page is %.0f px tall (viewport %.0f)", p.size, view, r.Height, r.Fold)
	order := []string{"summary", "Claim", "Execution", "Outcome", "Payload", "history", "provenance"}
	for _, k := range order {
		if _, ok := r.Parts[k]; !ok {
			p.t.Errorf("%s %s: the detail lacks %s", p.size, view, k)
		}
	}
	if !p.phone {
		if r.Height > 1800 {
			p.t.Errorf("%s %s: the detail is %.0f px tall, over two screens (1800 px)", p.size, view, r.Height)
		}
		for _, k := range order[:4] {
			if r.Bottom[k] > r.Fold {
				p.t.Errorf("%s %s: %s ends at %.0f px, below the fold (%.0f)", p.size, view, k, r.Bottom[k], r.Fold)
			}
		}
	} else {
		for i := 1; i < len(order); i++ {
			if r.Parts[order[i]] <= r.Parts[order[i-1]] || r.Left[order[i]] != r.Left[order[0]] && order[i] != "history" {
				p.t.Errorf("%s %s: %s (top %.0f, left %.0f) does not follow %s (top %.0f) in one column", p.size, view,
					order[i], r.Parts[order[i]], r.Left[order[i]], order[i-1], r.Parts[order[i-1]])
			}
		}
	}
	p.checkLayout(view)
	p.shot(view)
	p.fullShot(view)
}

// noBidi checks that no bidirectional control character reaches the page
// as it is (text or attribute) and that they are shown escaped.
func (p *page) noBidi(view string) {
	p.t.Helper()
	var r struct {
		Raw     bool `json:"raw"`
		Escaped bool `json:"escaped"`
	}
	p.eval(`(() => ({raw: /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/.test(document.documentElement.outerHTML + document.title),
	  escaped: document.body.innerText.includes('\\u202E') || document.body.innerText.includes('\\u2067')}))()`, &r)
	if r.Raw || !r.Escaped {
		p.t.Errorf("%s %s: bidi controls raw on the page: %v, shown escaped: %v", p.size, view, r.Raw, r.Escaped)
	}
}

// overviewScenario: the landing page shows the six charts, each with its
// text alternative, and they follow a command without a reload.
func overviewScenario(t *testing.T, p *page) {
	p.waitFor("the overview's charts", `!document.querySelector('#view-overview').hidden && document.querySelectorAll('#charts figure.chart').length === 6`)
	var charts []struct {
		ID    string `json:"id"`
		Label string `json:"label"`
		Rows  int    `json:"rows"`
		Marks int    `json:"marks"`
		Width int    `json:"width"`
	}
	p.eval(`[...document.querySelectorAll('#charts figure.chart')].map(f => ({id: f.id, label: f.querySelector('svg[role=img]').getAttribute('aria-label') || '',
	  rows: f.querySelectorAll('table.figures tbody tr').length, marks: f.querySelectorAll('svg path, svg rect').length,
	  width: Math.round(f.querySelector('svg').getBoundingClientRect().width)}))`, &charts)
	for _, c := range charts {
		if c.Rows == 0 || !strings.Contains(c.Label, ":") {
			t.Errorf("%s chart %s: no text alternative (label %q, %d table rows)", p.size, c.ID, c.Label, c.Rows)
		}
		if c.Width < 280 {
			t.Errorf("%s chart %s: %d px wide, unreadable", p.size, c.ID, c.Width)
		}
	}
	for _, id := range []string{"chart-states", "chart-commands", "chart-devices"} {
		p.waitFor(id+" drawn", fmt.Sprintf(`document.querySelectorAll('#%s svg path').length > 0`, id))
	}
	p.waitFor("claim → start figures", `document.querySelector('#chart-claim-start tr[data-series=p50] td.then').textContent !== '—'`)
	var pending, label string
	p.eval(`document.querySelector('#chart-states tr[data-series=PENDING] td.now').textContent`, &pending)
	p.checkLayout("overview")
	p.shot("overview")
	p.fullShot("overview")
	var before int
	fmt.Sscan(pending, &before)
	seen := p.n.CreateTask(map[string]any{"job": "seen on the overview"}) // a command from elsewhere
	defer p.n.Cancel(seen)                                                // the next size's fleet claims its own tasks
	p.waitFor("the overview to follow the command", fmt.Sprintf(`document.querySelector('#chart-states tr[data-series=PENDING] td.now').textContent === '%d' &&
	  document.querySelector('#chart-states svg').getAttribute('aria-label').includes('PENDING: Now %d')`, before+1, before+1))
	// Every task of this test was created within the hour: undoing the
	// hour's transitions from today's counts must give an empty ledger an
	// hour ago, and today's figures must be the server's.
	var rows map[string][2]string
	p.eval(`Object.fromEntries([...document.querySelectorAll('#chart-states tbody tr')].map(r => [r.dataset.series, [r.querySelector('td.now').textContent, r.querySelector('td.then').textContent]]))`, &rows)
	var list struct {
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(p.n.Do("GET", nodetest.AdminPath+"/tasks?limit=1", p.n.AdminToken, nil, nil).Body, &list); err != nil {
		t.Fatal(err)
	}
	for st, want := range list.Counts {
		if rows[st][0] != fmt.Sprint(want) || rows[st][1] != "0" {
			t.Errorf("%s: tasks by state %s: now %q, an hour ago %q; want %d and 0", p.size, st, rows[st][0], rows[st][1], want)
		}
	}
	// The story took 3 s from claim to start and 5 s from start to finish,
	// the others no time: the hour's p95 is the story's.
	var c2s, s2f string
	p.eval(`document.querySelector('#chart-claim-start tr[data-series=p95] td.then').textContent`, &c2s)
	p.eval(`document.querySelector('#chart-start-finish tr[data-series=p95] td.then').textContent`, &s2f)
	if c2s != "3 s" || s2f != "5 s" {
		t.Errorf("%s: the hour's p95 claim → start %q, start → finish %q; want 3 s and 5 s", p.size, c2s, s2f)
	}
	p.eval(`document.querySelector('#chart-commands svg').getAttribute('aria-label')`, &label)
	if !strings.Contains(label, "committed commands: Last min") {
		t.Errorf("%s: the commands chart's text alternative: %q", p.size, label)
	}
}

// deviceScenario: a device's page shows its claims, executions and
// presence as a timeline, the bidi controls of its result escaped.
func deviceScenario(t *testing.T, p *page, f *fleet) {
	p.click("button", "Device "+f.storyName)
	p.waitFor("the device's timeline", fmt.Sprintf(`!document.querySelector('#view-device').hidden && document.querySelector('#device-title').title === %q &&
	  [...document.querySelectorAll('#device-timeline tbody tr')].some(r => r.innerText.includes('task.completed'))`, f.storyDevice))
	txt := p.text()
	for _, want := range []string{"task.claimed", "task.started", "task.heartbeat ×8", "task.completed", "last presence report", "presence: online, ready", `invoice\u202Efdp.exe`} {
		if !strings.Contains(txt, want) {
			t.Errorf("%s: the device's page lacks %q", p.size, want)
		}
	}
	p.noBidi("device")
	p.checkLayout("device")
	p.shot("device")
	p.fullShot("device")
	p.click("button", "Task "+f.story)
	p.waitFor("the story from the device's page", fmt.Sprintf(`document.querySelector('#task-title').title === %q && document.querySelector('#history tbody tr') !== null`, f.story))
	p.click("tab", "Devices")
}

// The console learns the signed-in token's role (GET /admin/whoami) and
// shows an auditor no action it cannot do; an operator keeps them.
func TestConsoleShowsAnAuditorNoActions(t *testing.T) {
	actx := browser(t)
	n := nodetest.Start(t)
	toks := roleTokens(t, n)
	dev := n.RegisterDevice()
	task := n.CreateTask(map[string]any{"k": 1})
	p := openPage(t, actx, n, t.TempDir(), "desktop", 1280, 800, false)
	p.waitFor("the sign-in form", `document.querySelector('#token') !== null && !document.querySelector('#view-signin').hidden`)
	p.fill("Admin token", toks[wire.RoleAuditor])
	p.click("button", "Sign in")
	p.waitFor("the auditor's role", `!document.querySelector('#nav').hidden && document.querySelector('#new-task').hidden`)
	p.click("tab", "Tasks") // the console opens on the overview
	p.waitFor("the task row", fmt.Sprintf(`!!document.querySelector('tr[data-task-id=%q]')`, task))
	p.openTask(task)
	var visible int
	p.eval(`[...document.querySelectorAll('#task-actions button')].filter(b => b.offsetParent !== null).length`, &visible)
	if visible != 0 {
		t.Fatalf("an auditor sees %d task actions", visible)
	}
	p.click("tab", "Devices")
	p.waitFor("the device row", fmt.Sprintf(`!!document.querySelector('tr[data-device-id=%q]')`, dev.ID))
	p.eval(`document.querySelector('#register-device').hidden ? 0 : 1 + document.querySelectorAll('#devices button.danger').length`, &visible)
	if visible != 0 {
		t.Fatalf("an auditor sees device actions")
	}

	p.click("button", "Sign out")
	p.fill("Admin token", toks[wire.RoleOperator])
	p.click("button", "Sign in")
	p.waitFor("the operator's role", `!document.querySelector('#nav').hidden && !document.querySelector('#new-task').hidden`)
	p.click("tab", "Devices")
	p.waitFor("the operator's actions", `!document.querySelector('#register-device').hidden && document.querySelectorAll('#devices button.danger').length > 0`)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errors) > 0 {
		t.Fatalf("page errors: %v", p.errors)
	}
}
