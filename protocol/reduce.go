package protocol

import (
	"bytes"
	"slices"
	"time"
)

// The reducers are pure functions state + action → state, one per channel
// kind, and the only way state changes anywhere in ahpd: the host applies an
// action to its own copy exactly as every client applies it to theirs, so
// the two cannot drift.
//
// They never modify their input. The new state shares everything the action
// did not touch with the old one (a delta copies the active turn's parts,
// never the finished turns), and an action that changes nothing returns the
// old pointer itself, which is how the host tells a no-op from a change.
// Actions of other channels and of types this version does not define leave
// the state as it is.

// Apply applies a to the state of any channel.
func Apply(state ChannelState, a Action) ChannelState {
	switch s := state.(type) {
	case *RootState:
		return ReduceRoot(s, a)
	case *SessionState:
		return ReduceSession(s, a)
	case *ChatState:
		return ReduceChat(s, a)
	case *TerminalState:
		return ReduceTerminal(s, a)
	case *ChangesetState:
		return ReduceChangeset(s, a)
	case *AnnotationsState:
		return ReduceAnnotations(s, a)
	case *ResourceWatchState:
		return ReduceResourceWatch(s, a)
	case *AutomationState:
		return ReduceAutomation(s, a)
	case *AutomationRunState:
		return ReduceAutomationRun(s, a)
	case *CanvasState:
		return ReduceCanvas(s, a)
	}
	return state
}

// FormatTime writes t as AHP timestamps are written: ISO 8601 in UTC with
// milliseconds, as JavaScript's Date.toISOString does.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ReduceRoot applies a root-channel action.
func ReduceRoot(s *RootState, a Action) *RootState {
	next := *s
	switch a := a.(type) {
	case *RootAgentsChangedAction:
		next.Agents = a.Agents
	case *RootActiveSessionsChangedAction:
		if s.ActiveSessions != nil && *s.ActiveSessions == a.ActiveSessions {
			return s
		}
		next.ActiveSessions = new(a.ActiveSessions)
	case *RootTerminalsChangedAction:
		next.Terminals = a.Terminals
	case *RootConfigChangedAction:
		if s.Config == nil {
			return s
		}
		config := *s.Config
		config.Values = mergeValues(config.Values, a.Config, a.Replace != nil && *a.Replace)
		if sameObject(config.Values, s.Config.Values) {
			return s
		}
		next.Config = &config
	default:
		return s
	}
	return &next
}

// ReduceResourceWatch applies a resource-watch action. Change events pass
// through to subscribers; the state only describes the watch.
func ReduceResourceWatch(s *ResourceWatchState, a Action) *ResourceWatchState {
	return s
}

// mergeValues returns config values with changes laid over them, or the
// changes alone when replace is set.
func mergeValues(values, changes Object, replace bool) Object {
	out := make(Object, len(values)+len(changes))
	if !replace {
		for k, v := range values {
			out[k] = v
		}
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

// withDirectory adds dir to a working-directory set.
func withDirectory(list []URI, dir URI) ([]URI, bool) {
	if slices.Contains(list, dir) {
		return list, false
	}
	return append(slices.Clip(list), dir), true
}

// withoutDirectory removes dir from a working-directory set.
func withoutDirectory(list []URI, dir URI) ([]URI, bool) {
	i := slices.Index(list, dir)
	if i < 0 {
		return list, false
	}
	return slices.Delete(slices.Clone(list), i, i+1), true
}

// replaceDirectory puts replacement where dir is in a working-directory
// set, in one step: the set never lacks the slot, so the primary directory
// stays first. A replacement already in the set earlier is kept where it
// is and dir goes; any later copy of it goes.
func replaceDirectory(list []URI, dir, replacement URI) ([]URI, bool) {
	i := slices.Index(list, dir)
	if i < 0 || dir == replacement {
		return list, false
	}
	if j := slices.Index(list, replacement); j >= 0 && j < i {
		return slices.Delete(slices.Clone(list), i, i+1), true
	}
	out := make([]URI, 0, len(list))
	for k, u := range list {
		switch {
		case k == i:
			out = append(out, replacement)
		case u != replacement:
			out = append(out, u)
		}
	}
	return out, true
}

// upsert replaces the element matching key or appends v, in a new slice.
func upsert[T any](list []T, v T, match func(T) bool) []T {
	if i := slices.IndexFunc(list, match); i >= 0 {
		out := slices.Clone(list)
		out[i] = v
		return out
	}
	return append(slices.Clip(list), v)
}

// without removes the element at i, in a new slice.
func without[T any](list []T, i int) []T {
	return slices.Delete(slices.Clone(list), i, i+1)
}

func sameString(a, b *string) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// sameObject compares open objects member by member, by JSON text.
func sameObject(a, b Object) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// sameValue compares two optional wire values by their encoding.
func sameValue[T any, P interface {
	*T
	wireValue
}](a, b P) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, errA := marshal(a)
	y, errB := marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}
