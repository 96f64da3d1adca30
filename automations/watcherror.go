package automations

import (
	"encoding/json"

	"github.com/ahpd/ahpd/protocol"
)

// WatchErrorOf reads why an automation's triggers do not watch (or missed
// changes), as its entry carries it in _meta (docs/AUTOMATIONS.md): what
// a client shows beside the automation. ok is false when they watch.
func WatchErrorOf(e protocol.AutomationEntry) (info protocol.ErrorInfo, ok bool) {
	raw, ok := e.Meta[watchErrorMeta]
	if !ok {
		return protocol.ErrorInfo{}, false
	}
	if err := json.Unmarshal(raw, &info); err != nil || info.Message == "" {
		return protocol.ErrorInfo{}, false
	}
	return info, true
}
