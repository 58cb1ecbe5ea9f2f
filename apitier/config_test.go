package apitier

import "testing"

// bridge-auth-keys: each at least 16 characters without whitespace.
func TestBridgeAuthKeysConfig(t *testing.T) {
	const key1, key2 = "first-bridge-auth-key-0123456789", "second-bridge-auth-key-0123456789"
	for _, keys := range [][]string{{"short"}, {"a key with spaces in it"}, {key1, ""}} {
		cfg := testConfig()
		cfg.BridgeAuthKeys = keys
		if err := cfg.Validate(); err == nil {
			t.Errorf("bridge-auth-keys %q accepted", keys)
		}
	}
	cfg := testConfig()
	cfg.BridgeAuthKeys = []string{key1, key2}
	if err := cfg.Validate(); err != nil {
		t.Errorf("valid keys refused: %v", err)
	}
}
