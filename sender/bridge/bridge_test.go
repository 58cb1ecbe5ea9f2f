package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func limit(n int) DataCheck {
	return func(d map[string]string) error {
		size := 0
		for k, v := range d {
			size += len(k) + len(v)
		}
		if size > n {
			return fmt.Errorf("%d bytes over %d", size, n)
		}
		return nil
	}
}

func testBridges() *Bridges {
	return New(&Bridge{AppIDs: []string{"android"}, Check: limit(200)},
		&Bridge{AppIDs: []string{"ios"}}, quiet())
}

func TestKnown(t *testing.T) {
	b := testBridges()
	for _, c := range []struct {
		typ, app string
		want     bool
	}{
		{"fcm", "android", true}, {"gcm", "android", true}, {"apns", "ios", true},
		{"fcm", "ios", false}, {"apns", "android", false}, {"adm", "android", false},
		{"webpush", "anything", true}, {"FCM", "android", false},
	} {
		if got := b.Known(c.typ, c.app); got != c.want {
			t.Errorf("Known(%q, %q) = %v, want %v", c.typ, c.app, got, c.want)
		}
	}
	if New(nil, nil, quiet()).Known("fcm", "android") {
		t.Error("no bridges configured, yet fcm is known")
	}
}

func TestData(t *testing.T) {
	chid := uuid.MustParse("deadbeef-13f9-4639-87f9-2ff731824f34")
	for _, c := range []struct {
		name string
		n    Notification
		want map[string]string
	}{
		{"empty", Notification{CHID: chid}, map[string]string{"chid": chid.String()}},
		{"aes128gcm", Notification{CHID: chid, Body: "AAEC", Encoding: "aes128gcm"},
			map[string]string{"chid": chid.String(), "body": "AAEC", "con": "aes128gcm"}},
		{"aesgcm", Notification{CHID: chid, Body: "AAEC", Encoding: "aesgcm", Encryption: "salt=abc", CryptoKey: "dh=def"},
			map[string]string{"chid": chid.String(), "body": "AAEC", "con": "aesgcm", "enc": "salt=abc", "cryptokey": "dh=def"}},
	} {
		got := Data(&c.n)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: data %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRequest(t *testing.T) {
	b := testBridges()
	uaid, chid := uuid.New(), uuid.New()
	fcmUser := storage.User{UAID: uaid, RouterType: "gcm", RouterData: RouterData("gcm", "android", "tok-12345678")}
	n := Notification{CHID: chid, TTL: 300, Urgency: "low", Topic: "t1", Body: "AAEC", Encoding: "aes128gcm"}
	r, err := b.Request(&fcmUser, &n)
	if err != nil {
		t.Fatal(err)
	}
	if r.Provider != "fcm" || r.Platform != "ANDROID" || r.PushKey != "tok-12345678" || r.Message != "" ||
		r.Bridge.UAID != uaid || r.Bridge.CHID != chid || r.Bridge.AppID != "android" || r.Bridge.TTL != 300 ||
		r.Bridge.Urgency != "low" || r.Bridge.Topic != "t1" || r.Bridge.Data["body"] != "AAEC" {
		t.Fatalf("request %+v bridge %+v", r, r.Bridge)
	}
	apnsUser := storage.User{UAID: uaid, RouterType: "apns", RouterData: RouterData("apns", "ios", "abcdef0123456789")}
	if r, err := b.Request(&apnsUser, &n); err != nil || r.Provider != "apns" || r.Platform != "IOS" || r.Bridge.AppID != "ios" {
		t.Fatalf("apns: %+v %v", r, err)
	}

	big := n
	big.Body = strings.Repeat("A", 300)
	if _, err := b.Request(&fcmUser, &big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	gone := storage.User{UAID: uaid, RouterType: "fcm", RouterData: RouterData("fcm", "retired-app", "tok-12345678")}
	if _, err := b.Request(&gone, &n); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("unconfigured app id: %v", err)
	}
	broken := storage.User{UAID: uaid, RouterType: "fcm", RouterData: map[string]string{KeyAppID: "android"}}
	if _, err := b.Request(&broken, &n); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("no token: %v", err)
	}
	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	if !strings.Contains(buf.String(), mMisconfigured+" 1") {
		t.Fatalf("misconfiguration not counted:\n%s", buf.String())
	}
}

func openStore(t *testing.T) *embedded.Store {
	t.Helper()
	store, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// TestDeviceGone: the registration is dropped when the gone push carried
// its current token, kept when the device registered a new one since.
func TestDeviceGone(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	b := New(&Bridge{AppIDs: []string{"android"}}, nil, quiet())
	gone := b.DeviceGone(store)
	register := func(token string) uuid.UUID {
		u := storage.User{UAID: uuid.New(), RouterType: "fcm", RouterData: RouterData("fcm", "android", token),
			ConnectedAt: time.Now().UnixMilli()}
		if err := store.Connect(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u.UAID
	}
	push := func(uaid uuid.UUID, token string) storage.Push {
		return storage.Push{ID: uuid.New(), Provider: "fcm", PushKey: token, Bridge: &storage.PushBridge{UAID: uaid, AppID: "android"}}
	}

	a := register("old-token-1")
	gone(ctx, push(a, "old-token-1"))
	if _, err := store.GetUser(ctx, a); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("gone device's registration: %v, want dropped", err)
	}
	gone(ctx, push(a, "old-token-1")) // a second verdict for a dropped user: nothing to do

	k := register("new-token-2")
	gone(ctx, push(k, "old-token-1"))
	if _, err := store.GetUser(ctx, k); err != nil {
		t.Fatalf("a verdict about an old token dropped the registration: %v", err)
	}
	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	for _, want := range []string{mDropped + `{result="dropped"} 1`, mDropped + `{result="kept"} 1`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, buf.String())
		}
	}
}

// racingStore registers a new token for the user (a PUT) between
// DeviceGone's read of the record and its drop.
type racingStore struct {
	*embedded.Store
	t     *testing.T
	token string
}

func (r *racingStore) DropUserAt(ctx context.Context, uaid uuid.UUID, connectedAt int64) error {
	u, err := r.GetUser(ctx, uaid)
	if err != nil {
		r.t.Fatalf("racing PUT: %v", err)
	}
	u.RouterData = RouterData("fcm", "android", r.token)
	u.ConnectedAt = max(time.Now().UnixMilli(), u.ConnectedAt+1)
	if err := r.Connect(ctx, u); err != nil {
		r.t.Fatalf("racing PUT: %v", err)
	}
	return r.Store.DropUserAt(ctx, uaid, connectedAt)
}

// A new token registered between the verdict's read of the record and
// its drop survives: the drop names the record it read.
func TestDeviceGoneRacingNewToken(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	b := New(&Bridge{AppIDs: []string{"android"}}, nil, quiet())
	u := storage.User{UAID: uuid.New(), RouterType: "fcm", RouterData: RouterData("fcm", "android", "old-token-1"),
		ConnectedAt: time.Now().UnixMilli()}
	if err := store.Connect(ctx, u); err != nil {
		t.Fatal(err)
	}
	b.DeviceGone(&racingStore{Store: store, t: t, token: "new-token-2"})(ctx,
		storage.Push{ID: uuid.New(), Provider: "fcm", PushKey: "old-token-1", Bridge: &storage.PushBridge{UAID: u.UAID, AppID: "android"}})
	got, err := store.GetUser(ctx, u.UAID)
	if err != nil || got.RouterData[KeyToken] != "new-token-2" {
		t.Fatalf("the registration with the new token: %+v %v, want kept", got, err)
	}
	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	if !strings.Contains(buf.String(), mDropped+`{result="kept"} 1`) || strings.Contains(buf.String(), mDropped+`{result="dropped"} 1`) {
		t.Errorf("metrics:\n%s", buf.String())
	}
}

// metricValue is the value of one series of the bridges' metrics (-1:
// not served).
func metricValue(t *testing.T, b *Bridges, series string) float64 {
	t.Helper()
	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	for line := range strings.Lines(buf.String()) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return -1
}

// TestMixupRule: BadDeviceToken answers are counted per app; the mix-up
// is reported (gauge 1, one error line naming the app and its
// environment) once the rule's number of distinct tokens were refused
// within its sliding window, not for one token refused again and again,
// and again at most once per window while it lasts; the gauge falls back
// once the window has passed.
func TestMixupRule(t *testing.T) {
	var logBuf bytes.Buffer
	b := New(nil, &Bridge{AppIDs: []string{"ios", "beta"}, Mixup: MixupRule{Tokens: 3, Window: time.Minute},
		Environments: map[string]string{"ios": "production", "beta": "sandbox"}}, slog.New(slog.NewTextHandler(&logBuf, nil)))
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b.now = func() time.Time { return now }
	reports := func() int { return strings.Count(logBuf.String(), "likely a sandbox/production mix-up") }
	gauge := func(app string) float64 { return metricValue(t, b, mMixup+`{app_id="`+app+`"}`) }
	if gauge("ios") != 0 || gauge("beta") != 0 || metricValue(t, b, mBadToken+`{app_id="ios"}`) != 0 {
		t.Fatalf("series not served from the start:\n%s", func() string { var w bytes.Buffer; b.WriteMetrics(&w); return w.String() }())
	}
	for range 5 {
		b.BadDeviceToken("ios", "stale")
	}
	if gauge("ios") != 0 || reports() != 0 || metricValue(t, b, mBadToken+`{app_id="ios"}`) != 5 {
		t.Fatalf("one token refused 5 times: gauge %v, %d reports", gauge("ios"), reports())
	}
	now = now.Add(50 * time.Second)
	b.BadDeviceToken("ios", "t2")
	if gauge("ios") != 0 || reports() != 0 {
		t.Fatal("reported with 2 distinct tokens")
	}
	b.BadDeviceToken("ios", "t3")
	line := logBuf.String()
	if gauge("ios") != 1 || reports() != 1 || !strings.Contains(line, `app_id=ios`) || !strings.Contains(line, "environment=production") ||
		!strings.Contains(line, `app \"ios\"`) || !strings.Contains(line, "level=ERROR") || gauge("beta") != 0 {
		t.Fatalf("3 distinct tokens within a minute: gauge %v, log %s", gauge("ios"), line)
	}
	now = now.Add(20 * time.Second)
	b.BadDeviceToken("ios", "t4")
	if gauge("ios") != 1 || reports() != 1 {
		t.Fatalf("the burst went on: gauge %v, %d reports, want 1 and still 1", gauge("ios"), reports())
	}
	now = now.Add(61 * time.Second)
	if gauge("ios") != 0 {
		t.Fatal("the gauge stays up after the window passed")
	}
	for _, tok := range []string{"t5", "t6", "t7"} {
		b.BadDeviceToken("ios", tok)
	}
	if gauge("ios") != 1 || reports() != 2 {
		t.Fatalf("a new burst a window later: gauge %v, %d reports", gauge("ios"), reports())
	}
	b.BadDeviceToken("unknown-app", "x")
	if metricValue(t, b, mBadToken+`{app_id="ios"}`) != 11 || metricValue(t, b, mBadToken+`{app_id="unknown-app"}`) != -1 {
		t.Fatal("counts wrong")
	}

	off := New(nil, &Bridge{AppIDs: []string{"ios"}}, quiet())
	for _, tok := range []string{"a", "b", "c", "d"} {
		off.BadDeviceToken("ios", tok)
	}
	if metricValue(t, off, mBadToken+`{app_id="ios"}`) != 4 || metricValue(t, off, mMixup+`{app_id="ios"}`) != 0 {
		t.Fatal("with no rule: counted, never reported")
	}
}

// TestRequestCarriesAPS: an APNs registration's aps reaches the
// provider in the notification's data; an FCM one never carries one.
func TestRequestCarriesAPS(t *testing.T) {
	b := testBridges()
	apnsUser := storage.User{UAID: uuid.New(), RouterType: "apns", RouterData: RouterData("apns", "ios", "abcdef0123456789")}
	apnsUser.RouterData[KeyAPS] = `{"title":"t"}`
	r, err := b.Request(&apnsUser, &Notification{CHID: uuid.New()})
	if err != nil || r.Bridge.Data["aps"] != `{"title":"t"}` {
		t.Fatalf("apns: %+v %v", r.Bridge, err)
	}
	fcmUser := storage.User{UAID: uuid.New(), RouterType: "fcm", RouterData: RouterData("fcm", "android", "tok-12345678")}
	fcmUser.RouterData[KeyAPS] = `{"title":"t"}`
	if r, err := b.Request(&fcmUser, &Notification{CHID: uuid.New()}); err != nil || r.Bridge.Data["aps"] != "" {
		t.Fatalf("fcm: %+v %v", r.Bridge, err)
	}
}
