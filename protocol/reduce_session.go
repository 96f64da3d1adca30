package protocol

import "slices"

// ReduceSession applies a session-channel action.
func ReduceSession(s *SessionState, a Action) *SessionState {
	next := *s
	switch a := a.(type) {
	case *SessionReadyAction:
		// Only the lifecycle moves: a first turn may already be running,
		// and the status follows the turns, not the lifecycle.
		next.Lifecycle = SessionLifecycleReady
	case *SessionCreationFailedAction:
		next.Lifecycle = SessionLifecycleFailed
		next.CreationError = &a.Error
	case *SessionChatAddedAction:
		next.Chats = upsert(s.Chats, a.Summary, func(c ChatSummary) bool { return c.Resource == a.Summary.Resource })
	case *SessionChatRemovedAction:
		i := slices.IndexFunc(s.Chats, func(c ChatSummary) bool { return c.Resource == a.Chat })
		if i < 0 {
			return s
		}
		next.Chats = without(s.Chats, i)
		if s.DefaultChat != nil && *s.DefaultChat == a.Chat {
			next.DefaultChat = nil
		}
	case *SessionChatUpdatedAction:
		i := slices.IndexFunc(s.Chats, func(c ChatSummary) bool { return c.Resource == a.Chat })
		if i < 0 {
			return s
		}
		next.Chats = slices.Clone(s.Chats)
		next.Chats[i] = next.Chats[i].Merge(&a.Changes)
	case *SessionChatsReorderedAction:
		chats, ok := reorderedChats(s.Chats, a.Chats)
		if !ok {
			return s
		}
		next.Chats = chats
	case *SessionDefaultChatChangedAction:
		if sameString(s.DefaultChat, a.DefaultChat) {
			return s
		}
		next.DefaultChat = a.DefaultChat
	case *SessionTitleChangedAction:
		if s.Title == a.Title {
			return s
		}
		next.Title = a.Title
	case *SessionIsReadChangedAction:
		if next.Status = s.Status.With(StatusIsRead, a.IsRead); next.Status == s.Status {
			return s
		}
	case *SessionIsArchivedChangedAction:
		if next.Status = s.Status.With(StatusIsArchived, a.IsArchived); next.Status == s.Status {
			return s
		}
	case *SessionActivityChangedAction:
		if sameString(s.Activity, a.Activity) {
			return s
		}
		next.Activity = a.Activity
	case *SessionChangesetsChangedAction:
		next.Changesets = a.Changesets
	case *SessionConfigChangedAction:
		if s.Config == nil {
			return s
		}
		config := *s.Config
		config.Values = mergeValues(config.Values, a.Config, a.Replace != nil && *a.Replace)
		if sameObject(config.Values, s.Config.Values) {
			return s
		}
		next.Config = &config
	case *SessionMetaChangedAction:
		next.Meta = a.Meta
	case *SessionServerToolsChangedAction:
		next.ServerTools = a.Tools
	case *SessionActiveClientSetAction:
		next.ActiveClients = upsert(s.ActiveClients, a.ActiveClient, func(c SessionActiveClient) bool {
			return c.ClientID == a.ActiveClient.ClientID
		})
	case *SessionActiveClientRemovedAction:
		i := slices.IndexFunc(s.ActiveClients, func(c SessionActiveClient) bool { return c.ClientID == a.ClientID })
		if i < 0 {
			return s
		}
		next.ActiveClients = without(s.ActiveClients, i)
	case *SessionWorkingDirectorySetAction:
		dirs, changed := withDirectory(s.WorkingDirectories, a.Directory)
		if !changed {
			return s
		}
		next.WorkingDirectories = dirs
	case *SessionWorkingDirectoryRemovedAction:
		dirs, changed := withoutDirectory(s.WorkingDirectories, a.Directory)
		if !changed {
			return s
		}
		next.WorkingDirectories = dirs
	case *SessionWorkingDirectoryReplacedAction:
		dirs, changed := replaceDirectory(s.WorkingDirectories, a.Directory, a.Replacement)
		if !changed {
			return s
		}
		next.WorkingDirectories = dirs
	case *SessionInputNeededSetAction:
		id := inputRequestID(a.Request)
		next.InputNeeded = upsert(s.InputNeeded, a.Request, func(r SessionInputRequest) bool { return inputRequestID(r) == id })
		next.Status = withInputNeeded(s.Status, next.InputNeeded)
	case *SessionInputNeededRemovedAction:
		i := slices.IndexFunc(s.InputNeeded, func(r SessionInputRequest) bool { return inputRequestID(r) == a.ID })
		if i < 0 {
			return s
		}
		next.InputNeeded = without(s.InputNeeded, i)
		next.Status = withInputNeeded(s.Status, next.InputNeeded)
		if len(next.InputNeeded) == 0 {
			next.InputNeeded = nil
		}
	case *SessionCustomizationsChangedAction:
		next.Customizations = a.Customizations
	case *SessionCustomizationToggledAction:
		return toggleCustomization(s, a.ID, a.Enablement)
	case *SessionCustomizationUpdatedAction:
		id := customizationID(a.Customization)
		next.Customizations = upsert(s.Customizations, a.Customization, func(c Customization) bool { return customizationID(c) == id })
	case *SessionCustomizationRemovedAction:
		return removeCustomization(s, a.ID)
	case *SessionMCPServerStateChangedAction:
		return updateMCPServer(s, a.ID, func(m *MCPServerCustomization) {
			m.State, m.Channel = a.State, a.Channel
		})
	case *SessionMCPServerStartRequestedAction:
		return updateMCPServer(s, a.ID, func(m *MCPServerCustomization) {
			m.State, m.Channel = &MCPServerStartingState{}, nil
		})
	case *SessionMCPServerBackgroundRequestedAction:
		return updateMCPServerIf(s, a.ID, func(m *MCPServerCustomization) bool {
			starting, ok := m.State.(*MCPServerStartingState)
			if !ok || starting.Blocking == nil || !*starting.Blocking {
				return false
			}
			m.State = &MCPServerStartingState{Blocking: new(false), Extra: starting.Extra}
			return true
		})
	case *SessionMCPServerStopRequestedAction:
		return updateMCPServer(s, a.ID, func(m *MCPServerCustomization) {
			m.State, m.Channel = &MCPServerStoppedState{}, nil
		})
	default:
		return s
	}
	return &next
}

// reorderedChats puts the chat catalogue in the order given, which must
// name every chat exactly once; any other order is ignored.
func reorderedChats(chats []ChatSummary, order []URI) ([]ChatSummary, bool) {
	if len(order) != len(chats) {
		return nil, false
	}
	at := make(map[URI]int, len(chats))
	for i, c := range chats {
		at[c.Resource] = i
	}
	out := make([]ChatSummary, 0, len(order))
	moved := false
	for i, uri := range order {
		j, ok := at[uri]
		if !ok {
			return nil, false
		}
		delete(at, uri) // a repeated URI is then unknown
		moved = moved || i != j
		out = append(out, chats[j])
	}
	return out, moved
}

// withInputNeeded reflects the session's input queue in its activity bits.
// An entry waiting on a person raises InputNeeded; once none does, only the
// input bit is dropped, so a running turn reads InProgress again and an idle
// session stays idle. Work handed to a client to execute waits on nobody.
func withInputNeeded(status SessionStatus, queue []SessionInputRequest) SessionStatus {
	for _, r := range queue {
		if _, clientWork := r.(*SessionToolClientExecutionRequest); !clientWork {
			return status.WithActivity(StatusInputNeeded)
		}
	}
	return status &^ (StatusInputNeeded &^ StatusInProgress)
}

func inputRequestID(r SessionInputRequest) string {
	id, _ := InputRequestOf(r)
	return id
}

// Merge returns the summary with the members set in changes laid over it.
// The resource names the chat and is never changed.
func (c ChatSummary) Merge(changes *PartialChatSummary) ChatSummary {
	if changes.Title != nil {
		c.Title = *changes.Title
	}
	if changes.Status != nil {
		c.Status = *changes.Status
	}
	if changes.Activity != nil {
		c.Activity = changes.Activity
	}
	if changes.ModifiedAt != nil {
		c.ModifiedAt = *changes.ModifiedAt
	}
	if changes.Changes != nil {
		c.Changes = changes.Changes
	}
	if changes.Origin != nil {
		c.Origin = changes.Origin
	}
	if changes.Movable != nil {
		c.Movable = changes.Movable
	}
	if changes.Interactivity != nil {
		c.Interactivity = changes.Interactivity
	}
	if changes.WorkingDirectories != nil {
		c.WorkingDirectories = changes.WorkingDirectories
	}
	if len(changes.Extra) > 0 {
		extra := make(Object, len(c.Extra)+len(changes.Extra))
		for k, v := range c.Extra {
			extra[k] = v
		}
		for k, v := range changes.Extra {
			extra[k] = v
		}
		c.Extra = extra
	}
	return c
}
