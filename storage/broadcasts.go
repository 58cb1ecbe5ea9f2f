package storage

import "fmt"

// MaxBroadcastLen bounds a broadcast id and a broadcast version. Megaphone's
// ids are "broadcaster/channel" ("remote-settings/monitor_changes") and
// its versions short strings (Remote Settings sends a quoted timestamp).
const MaxBroadcastLen = 256

// ValidateBroadcast checks an id and version passed to PutBroadcast: each
// 1..MaxBroadcastLen bytes of visible ASCII (no space or control
// character), so that every client can echo them back byte for byte.
func ValidateBroadcast(id, version string) error {
	if !isVisibleASCII(id, MaxBroadcastLen) {
		return fmt.Errorf("broadcast id %q is not 1..%d visible ASCII characters: %w", id, MaxBroadcastLen, ErrInvalid)
	}
	if !isVisibleASCII(version, MaxBroadcastLen) {
		return fmt.Errorf("broadcast version %q is not 1..%d visible ASCII characters: %w", version, MaxBroadcastLen, ErrInvalid)
	}
	return nil
}

func isVisibleASCII(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
