package protocol

import (
	"math/rand/v2"
	"testing"
)

func TestValidChannelID(t *testing.T) {
	for _, s := range []string{testChid, "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"} {
		if !ValidChannelID(s) {
			t.Errorf("ValidChannelID(%q) = false", s)
		}
	}
	for _, s := range []string{"", "5A7C26A2-44B8-4B8C-8C4A-7E1C1D29A0B1", "5a7c26a244b84b8c8c4a7e1c1d29a0b1",
		"5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b", "5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b1a", "5a7c26a2_44b8-4b8c-8c4a-7e1c1d29a0b1",
		"{5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0b}", "5a7c26a2-44b8-4b8c-8c4a-7e1c1d29a0bg", "5a7c26a-244b8-4b8c-8c4a-7e1c1d29a0b1"} {
		if ValidChannelID(s) {
			t.Errorf("ValidChannelID(%q) = true", s)
		}
	}
}

func TestParseUAID(t *testing.T) {
	want := [16]byte{0x4f, 0x2d, 0x1e, 0x0c, 0x9b, 0x8a, 0x47, 0xd6, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0, 0x0a, 0x1b}
	for _, s := range []string{"4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b", "4F2D1E0C9B8A47D6A5B4C3D2E1F00A1B", "4f2d1e0c-9b8a-47d6-a5b4-c3d2e1f00a1b"} {
		got, ok := ParseUAID(s)
		if !ok || got != want {
			t.Errorf("ParseUAID(%q) = %x, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "invalid", "4f2d1e0c9b8a47d6a5b4c3d2e1f00a1", "4f2d1e0c9b8a47d6a5b4c3d2e1f00a1g",
		"4f2d1e0c-9b8a-47d6-a5b4c3d2e1f00a1b", "4f2d1e0c-9b8a-47d6-a5b4-c3d2e1f00a1bb", "4f2d1e0c--b8a-47d6-a5b4-c3d2e1f00a1b",
		"4f2d1e0c-9-8a-47d6-a5b4-c3d2e1f00a1b", "4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b    "} {
		if _, ok := ParseUAID(s); ok {
			t.Errorf("ParseUAID(%q) ok", s)
		}
	}
	if got := FormatUAID(want); got != "4f2d1e0c9b8a47d6a5b4c3d2e1f00a1b" {
		t.Errorf("FormatUAID = %q", got)
	}
	chid, ok := ParseChannelID(testChid)
	if !ok || string(AppendChannelID(nil, chid)) != testChid {
		t.Errorf("ParseChannelID/AppendChannelID round trip: %x %v", chid, ok)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 1000; i++ {
		var u [16]byte
		for j := range u {
			u[j] = byte(rng.Uint32())
		}
		if got, ok := ParseUAID(FormatUAID(u)); !ok || got != u {
			t.Fatalf("UAID round trip %x", u)
		}
		s := string(AppendChannelID(nil, u))
		if got, ok := ParseChannelID(s); !ok || got != u || !ValidChannelID(s) {
			t.Fatalf("channel ID round trip %x", u)
		}
	}
}
