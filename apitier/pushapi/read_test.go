package pushapi

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// A bridged push's view masks its device token wherever its attempt log
// holds it (written by a provider or a version that did not hide it),
// unless asked to show it; a Swrve push's pushKey, the client's own user
// id, is shown as it is.
func TestViewMasksTheTokenInAttempts(t *testing.T) {
	token := "0123456789abcdef0123456789abcdef"
	masked := maskToken(token)
	p := storage.Push{ID: uuid.New(), Provider: "apns", PushKey: token, Bridge: &storage.PushBridge{AppID: "a"},
		Attempts: []storage.Attempt{{N: 1, Status: storage.AttemptError, ProviderReason: "reason " + token,
			ProviderMessage: "message " + token, Cause: `Post "https://h/3/device/` + url.PathEscape(token) + `": refused`}}}
	hidden, _ := json.Marshal(view(&p, false))
	if strings.Contains(string(hidden), token[4:len(token)-4]) || strings.Count(string(hidden), masked) != 4 {
		t.Errorf("a bridged push's view: %s, want the token masked in pushKey and the 3 texts", hidden)
	}
	if shown, _ := json.Marshal(view(&p, true)); strings.Count(string(shown), token) != 4 {
		t.Errorf("a bridged push's view, revealed: %s", shown)
	}
	p.Bridge, p.Provider, p.PushKey = nil, "swrve", "user-7"
	p.Attempts[0].ProviderMessage = "no such user user-7"
	if own, _ := json.Marshal(view(&p, false)); strings.Count(string(own), "user-7") != 2 {
		t.Errorf("a Swrve push's view: %s", own)
	}
}
