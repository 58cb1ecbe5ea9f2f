package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/autopush-go/autopush/internal/endpointdiag"
	"github.com/autopush-go/autopush/internal/protocol"
	"github.com/autopush-go/autopush/internal/token"
	"github.com/autopush-go/autopush/storage"
	"github.com/autopush-go/autopush/storage/embedded"
	"github.com/google/uuid"
)

const key = "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="

func TestDiagnosesEndpoint(t *testing.T) {
	dir := t.TempDir()
	store, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	uaid, chid := uuid.New(), uuid.New()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(store.Connect(ctx, storage.User{UAID: uaid, RouterType: "webpush", NodeID: "http://10.0.0.5:8081", ConnectedAt: time.Now().UnixMilli()}))
	must(store.AddChannel(ctx, uaid, chid))
	must(store.SaveMessage(ctx, uaid, storage.Message{CHID: chid, Version: "pending-1", SortKey: storage.NewSortKey(), TTL: 60, Data: "YWJj"}))
	must(store.SaveMessage(ctx, uaid, storage.Message{CHID: chid, Version: "topic-1", Topic: "news", SortKey: storage.NewSortKey(), TTL: 60}))
	must(store.Close())

	keys, _ := token.ParseKeys(key)
	endpoint, err := keys.MakeEndpoint("https://push.example.com", uaid, chid, nil)
	must(err)

	var out bytes.Buffer
	must(run(ctx, []string{"-crypto-key", key, "-data-dir", dir, "-json", endpoint}, &out, &out))
	var rep endpointdiag.Report
	must(json.Unmarshal(out.Bytes(), &rep))
	if rep.UAID != protocol.FormatUAID(uaid) || rep.CHID != chid.String() || rep.Version != "v1" || rep.Registered == nil || !*rep.Registered ||
		rep.User == nil || rep.User.NodeID != "http://10.0.0.5:8081" || len(rep.Pending) != 1 || rep.Pending[0].Version != "pending-1" ||
		len(rep.Topic) != 1 || rep.Topic[0].Topic != "news" || rep.Channels != 1 {
		t.Fatalf("report %+v", rep)
	}

	// Text output, and an unknown user.
	out.Reset()
	other, _ := keys.MakeEndpoint("https://push.example.com", uuid.New(), chid, nil)
	must(run(ctx, []string{"-crypto-key", key, "-data-dir", dir, other}, &out, &out))
	if !strings.Contains(out.String(), "no router record") || !strings.Contains(out.String(), "channel registered: false") {
		t.Fatalf("text report:\n%s", out.String())
	}
}

func TestRejectsBadInput(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	if err := run(context.Background(), []string{"-crypto-key", key, "-data-dir", dir, "https://x/wpush/v1/garbage"}, &out, &out); err == nil {
		t.Fatal("garbage token accepted")
	}
	if err := run(context.Background(), []string{"-crypto-key", "nope", "x"}, &out, &out); err == nil {
		t.Fatal("bad key accepted")
	}
	if err := run(context.Background(), []string{"-crypto-key", key}, &out, &out); err == nil {
		t.Fatal("missing endpoint accepted")
	}
}
