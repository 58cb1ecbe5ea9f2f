package pushapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// FuzzPushBody: the POST /push body parser never panics; a refused body
// gets a 400 whose message names the problem without Go's type names; an
// accepted one means what encoding/json says it means and survives
// re-encoding.
func FuzzPushBody(f *testing.F) {
	for _, s := range []string{
		`{"platform":"IOS","messagePrototypeKey":"Hello","pushKey":"463B3209-6E33-4E88-AF52-CDA87C0550EC","message":"Hello client!","cronExpression":null}`,
		`{"platform":"ANDROID","messagePrototypeKey":"Good bye","pushKey":"k","message":"\u00e9\ud83d\ude00","cronExpression":"0 0/5 14,18 ? * MON-FRI"}`,
		`{}`, `null`, `[]`, `"IOS"`, `{"platform":1}`, `{"platform":"IOS","extra":true}`,
		`{"platform":"IOS"} {}`, `{"platform":"IOS"}}`, `{"platform":"IOS","platform":"ANDROID"}`,
	} {
		for i := 0; i <= len(s); i++ { // every prefix: a truncated body fails cleanly
			f.Add([]byte(s[:i]))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, herr := parseBody(body)
		if herr != nil {
			if herr.Status != http.StatusBadRequest || !strings.HasPrefix(herr.Message, "Invalid JSON body: ") {
				t.Fatalf("refused with %d %q", herr.Status, herr.Message)
			}
			for _, goType := range []string{"*string", "pushapi.", "pushBody", "Go value"} {
				if strings.Contains(herr.Message, goType) {
					t.Fatalf("message %q shows Go's types", herr.Message)
				}
			}
			return
		}
		var want pushBody
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
		}
		if req.Platform != str(want.Platform) || req.PrototypeKey != str(want.MessagePrototypeKey) ||
			req.PushKey != str(want.PushKey) || req.Message != str(want.Message) || req.CronExpression != str(want.CronExpression) {
			t.Fatalf("parsed %+v, encoding/json reads %+v", req, want)
		}
		again, err := json.Marshal(map[string]string{"platform": req.Platform, "messagePrototypeKey": req.PrototypeKey,
			"pushKey": req.PushKey, "message": req.Message, "cronExpression": req.CronExpression})
		if err != nil {
			t.Fatal(err)
		}
		back, herr := parseBody(again)
		if herr != nil || back != req {
			t.Fatalf("re-encoded %s parsed to %+v (%v), want %+v", again, back, herr, req)
		}
	})
}
