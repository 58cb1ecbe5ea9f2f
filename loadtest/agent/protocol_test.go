package agent

import "testing"

func TestAppendUUIDAndJSONString(t *testing.T) {
	u := [16]byte{0xde, 0xad, 0xbe, 0xef, 0, 1, 0x40, 2, 0x80, 3, 4, 5, 6, 7, 8, 9}
	if got := string(appendUUID(nil, u)); got != "deadbeef-0001-4002-8003-040506070809" {
		t.Errorf("uuid %s", got)
	}
	if id, ok := parseUAID("deadbeef00014002800304050607080 9"); ok {
		t.Errorf("bad uaid parsed: %x", id)
	}
	if id, ok := parseUAID("deadbeef-0001-4002-8003-040506070809"); !ok || id != u {
		t.Errorf("dashed uaid: %x %v", id, ok)
	}
	if got := string(appendJSONString(nil, "a\"b\\c\n")); got != `"a\"b\\c\u000a"` {
		t.Errorf("json string %s", got)
	}
}
