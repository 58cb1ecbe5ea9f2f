package registration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/internal/vapid"
	"github.com/autopush-go/autopush/sender/bridge"
	"github.com/autopush-go/autopush/storage"
)

// FuzzRegistrationBody: the registration body parser never panics; a
// refused body is a 400 that names the problem without Go's type names;
// an accepted one holds a valid bridge token (for a bridge type), a
// valid VAPID key, an APS dictionary only for apns, and router data
// within storage's bound.
func FuzzRegistrationBody(f *testing.F) {
	for _, s := range []string{
		`{"token":"fcm-token-0123"}`,
		`{"token":"0123456789abcdef","aps":"{\"mutable-content\":1}","channelID":"` + uuid.NewString() + `"}`,
		`{"token":"fcm-token-0123","key":"BOrMsGYgRGLmn_fKg0VeXDa-wMNUZqTUhbPx4PhDE-6MZRUPtEt44aRi7ux3yZzAQ2AXAdqyjHbcHSwpUQAHgIQ"}`,
		`{}`, `null`, `[]`, `"x"`, `{"token":1}`, `{"token":"a b c d e f"}`, `{"token":"x"}{}`, `{"channelID":""}`,
	} {
		for i := 0; i <= len(s); i++ {
			f.Add([]byte(s[:i]), uint8(i))
		}
	}
	types := []string{storage.RouterWebPush, bridge.TypeFCM, bridge.TypeGCM, bridge.TypeAPNs}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		routerType := types[int(sel)%len(types)]
		withToken := sel&4 == 0
		in, herr := parseRegistrationBody(body, routerType, withToken)
		if herr != nil {
			if herr.Status != http.StatusBadRequest {
				t.Fatalf("refused with %d %q", herr.Status, herr.Message)
			}
			for _, goType := range []string{"*string", "registration.", "registrationBody", "Go value"} {
				if strings.Contains(herr.Message, goType) {
					t.Fatalf("message %q shows Go's types", herr.Message)
				}
			}
			return
		}
		if withToken && routerType != storage.RouterWebPush && !validBridgeToken(in.token) {
			t.Fatalf("accepted token %q", in.token)
		}
		if !withToken && in.token != "" {
			t.Fatalf("kept a token %q where none is read", in.token)
		}
		if in.key != nil && vapid.CheckKey(in.key) != nil {
			t.Fatalf("accepted key %x", in.key)
		}
		if in.aps != "" && (routerType != bridge.TypeAPNs || len(in.aps) > maxAPS) {
			t.Fatalf("kept aps %q for %s", in.aps, routerType)
		}
		if d := routerData(routerType, "app", &in); routerType != storage.RouterWebPush {
			n := 0
			for k, v := range d {
				n += len(k) + len(v)
			}
			if n > storage.MaxRouterData {
				t.Fatalf("router data of %d bytes, over storage's %d", n, storage.MaxRouterData)
			}
		}
	})
}
