package stack_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/apitier/apitiertest"
	"github.com/autopush-go/autopush/sender/provider/providertest"
	"github.com/autopush-go/autopush/sender/sendertest/apnsfake"
	"github.com/autopush-go/autopush/sender/sendertest/fcmfake"
	"github.com/autopush-go/autopush/sender/sendertest/tcpfault"
	"github.com/autopush-go/autopush/stack"
	"github.com/autopush-go/autopush/stack/stacktest"
	"github.com/autopush-go/autopush/storage"
)

// failureKind is one way a bridged push's call can fail: set arranges it
// for the device token given, and done reports the attempt that shows it.
type failureKind struct {
	name string
	set  func(t *testing.T, token string)
	done func(a storage.Attempt) bool
}

// noAnswer reports an attempt that got no answer, whose cause or
// message says what happened (one of words).
func noAnswer(words ...string) func(storage.Attempt) bool {
	return func(a storage.Attempt) bool {
		if a.Status != storage.AttemptError || a.ProviderCode != 0 || a.ErrorType != storage.ErrorOther {
			return false
		}
		for _, w := range words {
			if strings.Contains(strings.ToLower(a.Cause+" "+a.ProviderMessage), w) {
				return true
			}
		}
		return false
	}
}

func answered(code int) func(storage.Attempt) bool {
	return func(a storage.Attempt) bool { return a.Status == storage.AttemptError && a.ProviderCode == code }
}

// kinds are a provider's failures through its front: HTTP errors (one
// whose answer quotes the token, as an API's validation error or a
// proxy's error page may), then reset, timeout and refused (last: the
// front stops listening).
func kinds(front *tcpfault.Front, answer func(token string, quote bool)) []failureKind {
	set := func(m tcpfault.Mode) func(*testing.T, string) {
		return func(t *testing.T, _ string) {
			if err := front.Set(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return []failureKind{
		{"HTTP 500", func(t *testing.T, token string) { set(tcpfault.Forward)(t, token); answer(token, false) }, answered(500)},
		{"HTTP 400 quoting the token", func(t *testing.T, token string) { answer(token, true) }, answered(400)},
		{"reset", set(tcpfault.Reset), noAnswer("reset", "closed before an answer")},
		{"timeout", set(tcpfault.Hang), noAnswer("timeout")},
		{"refused", set(tcpfault.Refuse), noAnswer("refused")},
	}
}

var apnsEndpoint = regexp.MustCompile(`"endpoint":"([^"]+)"`)

// TestNoDeviceTokenAfterProviderFailures: whatever way a bridged push's
// call to FCM or APNs fails (an HTTP error, one whose answer quotes the
// token, a reset, a timeout, a refused connection), no answer holds the
// device token, on any route, to any client but an admin who asks
// ?reveal=pushKey: the push read, listed in every state and searched,
// by admins and by the other clients, its WebPush answers, its receipt,
// and no line the node logs (debug level, request lines on). The attempt
// log still says what happened. On both backends.
func TestNoDeviceTokenAfterProviderFailures(t *testing.T) {
	forBackends(t, func(t *testing.T, through func(storage.Store) storage.Store) {
		var logs apitiertest.SyncBuffer
		var fcmFront, apnsFront *tcpfault.Front
		st := stacktest.StartWith(t, stacktest.Options{Bridges: true, Through: through,
			Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Config: func(c *stack.Config) {
				c.API.RequestLog, c.API.Receipts = true, true
				c.Sender.SenderConfig.RetryDelay = time.Second
				c.Sender.FCMConfig.Timeout, c.Sender.APNsConfig.Timeout = time.Second, time.Second
				fcmFront, c.Sender.FCMConfig.URL = providertest.StartFront(t, c.Sender.FCMConfig.URL)
				m := apnsEndpoint.FindStringSubmatch(c.Sender.APNsConfig.Apps)
				if m == nil {
					t.Fatalf("no endpoint in apns-apps %s", c.Sender.APNsConfig.Apps)
				}
				var to string
				apnsFront, to = providertest.StartFront(t, m[1])
				c.Sender.APNsConfig.Apps = strings.Replace(c.Sender.APNsConfig.Apps, m[1], to, 1)
			}})
		// A push that goes through, for the receipt subscribe resource.
		warm := registerDevice(t, st, "fcm", stacktest.FCMApp, "fcm-warm-"+randomHex(16))
		first := st.Push(t, warm.Endpoint, nil, "", stacktest.NewSigner(t))
		server := newApp(t, st, subscribeLink(t, first))
		if p := finalPush(t, st, warm.UAID); p.State != storage.PushSent {
			t.Fatalf("the first push: %+v", p)
		}

		fcmKinds := kinds(fcmFront, func(token string, quote bool) {
			if quote {
				st.FCM.Queue(fcmfake.Error(400, "INVALID_ARGUMENT", `Invalid value at 'message.token' (TYPE_STRING), "`+token+`"`, ""))
				return
			}
			st.FCM.Queue(fcmfake.Error(500, "INTERNAL", "Internal error encountered.", ""))
		})
		apnsKinds := kinds(apnsFront, func(token string, quote bool) {
			if quote {
				st.APNs.Queue(apnsfake.Fault{Status: 400, Reason: token})
				return
			}
			st.APNs.Queue(apnsfake.Fault{Status: 500, Reason: "InternalServerError"})
		})
		var answers []string
		var tokens []string
		for _, p := range []struct {
			typ, app string
			token    func() string
			kinds    []failureKind
		}{
			{"fcm", stacktest.FCMApp, func() string { return "fcm-token-" + randomHex(60) }, fcmKinds},
			{"apns", stacktest.APNsApp, func() string { return apnsToken(t) }, apnsKinds},
		} {
			for _, k := range p.kinds {
				token := p.token()
				tokens = append(tokens, token)
				d := registerDevice(t, st, p.typ, p.app, token)
				k.set(t, token)
				ans := st.Push(t, d.Endpoint, nil, "", server.signer, "Push-Receipt", server.sub)
				if ans.Status != http.StatusCreated {
					t.Fatalf("%s %s: push %d %s", p.typ, k.name, ans.Status, ans.Body)
				}
				answers = append(answers, record(ans))
				push := failedPush(t, st, d.UAID, p.typ+" "+k.name, k.done)
				answers = append(answers, readEverywhere(t, st, push, token)...)
				answers = append(answers, record(apitiertest.Send(t, http.MethodDelete, ans.Header.Get("Location"), nil)))
			}
		}
		// Receipts: every push's, as the application server reads them.
		waitFor(t, "every push's receipt", func() bool { return server.pending(t) >= len(tokens) })
		answers = append(answers, record(apitiertest.Send(t, http.MethodGet, server.sub, nil, "Authorization", st.Authorization(t, server.signer))))
		for _, token := range tokens {
			for _, a := range answers {
				wantNoToken(t, "an answer", a, token)
			}
			wantNoToken(t, "the log", logs.String(), token)
		}
	})
}

// failedPush waits for uaid's push to show an attempt done reports, and
// cancels it (as an admin) unless it is final, so that its retries end.
func failedPush(t *testing.T, st *stacktest.Stack, uaid, what string, done func(storage.Attempt) bool) storage.Push {
	t.Helper()
	var p storage.Push
	waitFor(t, what+": its attempt", func() bool {
		ps := pushesOf(t, st, uaid)
		if len(ps) != 1 {
			return false
		}
		for _, a := range ps[0].Attempts {
			if done(a) {
				p = ps[0]
				return true
			}
		}
		return false
	})
	admin := as(t, st, stacktest.PushAPIKey)
	waitFor(t, what+": cancelled or final", func() bool {
		ans := admin.do(http.MethodDelete, "/push/"+p.ID.String(), nil)
		if ans.Status == http.StatusNoContent {
			return true
		}
		now := admin.do(http.MethodGet, "/push/"+p.ID.String(), nil).JSON(t)
		return now["state"] == "SENT" || now["state"] == "FAILED" || now["state"] == "GIVEN_UP"
	})
	return p
}

// readEverywhere reads push p through every read route, as an admin
// without ?reveal and as each other client, and returns the answers. An
// admin's read says what happened (the attempt's cause or message) with
// the token masked; with ?reveal=pushKey, the token.
func readEverywhere(t *testing.T, st *stacktest.Stack, p storage.Push, token string) []string {
	t.Helper()
	loc := "/push/" + p.ID.String()
	var out []string
	admin := as(t, st, stacktest.PushAPIKey)
	ans := admin.do(http.MethodGet, loc, nil)
	out = append(out, record(ans))
	var got struct {
		PushKey  string `json:"pushKey"`
		Attempts []struct {
			Cause, ProviderMessage *string
		} `json:"attempts"`
	}
	if err := json.Unmarshal(ans.Body, &got); err != nil || len(got.Attempts) == 0 {
		t.Fatalf("an admin reads the push: %d %s", ans.Status, ans.Body)
	}
	if a := got.Attempts[0]; a.Cause == nil && a.ProviderMessage == nil {
		t.Errorf("the attempt says nothing of its failure: %s", ans.Body)
	}
	if got.PushKey != token[:4]+strings.Repeat("*", len(token)-8)+token[len(token)-4:] {
		t.Errorf("an admin's pushKey %q, want the token masked", got.PushKey)
	}
	if revealed := admin.do(http.MethodGet, loc+"?reveal=pushKey", nil).JSON(t); revealed["pushKey"] != token {
		t.Errorf("an admin's ?reveal=pushKey: %v", revealed["pushKey"])
	}
	for _, c := range []pushAPI{admin, as(t, st, stacktest.TeamA.Key), as(t, st, stacktest.TeamB.Key)} {
		if c.key != admin.key {
			out = append(out, record(c.do(http.MethodGet, loc, nil)), record(c.do(http.MethodGet, loc+"?reveal=pushKey", nil)),
				record(c.do(http.MethodDelete, loc, nil)))
		}
		for _, state := range storage.PushStates {
			for _, page := range []int{1, 1000} {
				_, bodies := c.listed("state="+string(state), page)
				out = append(out, bodies...)
			}
		}
		_, bodies := c.listed("pushKey="+url.QueryEscape(token), 10)
		out = append(out, bodies...)
	}
	return out
}

// record is an answer's body and headers as one text.
func record(a apitiertest.Answer) string {
	hdr, _ := json.Marshal(a.Header)
	return fmt.Sprintf("%d %s %s", a.Status, a.Body, hdr)
}

// wantNoToken fails when text holds the token, whole, escaped, or its
// masked middle.
func wantNoToken(t *testing.T, what, text, token string) {
	t.Helper()
	for _, form := range []string{token, url.PathEscape(token), url.QueryEscape(token), token[4 : len(token)-4]} {
		if i := strings.Index(text, form); i >= 0 {
			t.Fatalf("%s holds the device token %s: ...%s...", what, token, text[max(0, i-300):min(len(text), i+len(form)+100)])
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
