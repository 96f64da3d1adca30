package claude

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestOriginalFile checks how the CLI's account of a file before a call
// reads: the file's content, none for a file created, nothing told.
func TestOriginalFile(t *testing.T) {
	for _, tc := range []struct {
		account    string
		ok, exists bool
		data       string
	}{
		{`{"type":"update","filePath":"/a","originalFile":"one\ntwo\n"}`, true, true, "one\ntwo\n"},
		{`{"type":"create","filePath":"/a","content":"x","originalFile":null}`, true, false, ""},
		{`{"filePath":"/a"}`, false, false, ""},
		{`"a string"`, false, false, ""},
		{``, false, false, ""},
	} {
		v, ok := originalFile(jsontext.Value(tc.account))
		if ok != tc.ok || v.Exists != tc.exists || string(v.Data) != tc.data {
			t.Errorf("%s: %+v, %v", tc.account, v, ok)
		}
	}
}
