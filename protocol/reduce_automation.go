package protocol

import "slices"

// The reducers of the automation catalogue (ahp-automations://), of one
// automation run, and of a canvas. Automation create and update requests
// and a run's cancel request are asks of the host: they change nothing
// here, and the host answers with the actions that do.

// ReduceAutomation applies an automation-catalogue action.
func ReduceAutomation(s *AutomationState, a Action) *AutomationState {
	next := *s
	switch a := a.(type) {
	case *AutomationSetAction:
		uri := a.Automation.Resource
		next.Entries = upsert(s.Entries, a.Automation, func(e AutomationEntry) bool { return e.Resource == uri })
	case *AutomationRemovedAction:
		i := slices.IndexFunc(s.Entries, func(e AutomationEntry) bool { return e.Resource == a.Resource })
		if i < 0 {
			return s
		}
		next.Entries = without(s.Entries, i)
	default:
		return s
	}
	return &next
}

// ReduceAutomationRun applies an automation-run action.
func ReduceAutomationRun(s *AutomationRunState, a Action) *AutomationRunState {
	next := *s
	switch a := a.(type) {
	case *AutomationRunLifecycleChangedAction:
		next.Lifecycle = a.Lifecycle
	case *AutomationRunSessionSetAction:
		if slices.Contains(s.Sessions, a.Session) {
			return s
		}
		next.Sessions = append(slices.Clip(s.Sessions), a.Session)
	case *AutomationRunSessionRemovedAction:
		i := slices.Index(s.Sessions, a.Session)
		if i < 0 {
			return s
		}
		next.Sessions = without(s.Sessions, i)
		if s.PrimarySession != nil && *s.PrimarySession == a.Session {
			next.PrimarySession = nil
		}
	case *AutomationRunPrimarySessionChangedAction:
		if sameString(s.PrimarySession, a.PrimarySession) {
			return s
		}
		next.PrimarySession = a.PrimarySession
	default:
		return s
	}
	return &next
}

// ReduceCanvas applies a canvas action: the state is replaced whole, so a
// replacement without a url withdraws the live source.
func ReduceCanvas(s *CanvasState, a Action) *CanvasState {
	if a, ok := a.(*CanvasStateChangedAction); ok {
		next := a.Canvas
		return &next
	}
	return s
}
