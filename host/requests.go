package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/protocol"
)

// A createSession or createChat names what it makes with a URI the client
// chose, so a client that lost its connection before the answer sends the
// same request again. The record of what was made keeps a digest of the
// request that made it (requestDigest): the same request from the same
// principal is answered as the first was, another one for the URI is
// "already exists" as before.

// requestDigest is the digest of a create request p sent by who: what it
// asks for, not how this send of it was tracked (its progress token, the
// client that sent it).
func requestDigest(who grants.Principal, method string, p any) string {
	data, err := json.Marshal(p)
	if err != nil {
		return "" // never matches: a request that cannot be encoded is not answered as taken
	}
	h := sha256.New()
	h.Write([]byte(who.String()))
	h.Write([]byte{0})
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// sessionRequest is the digest of a createSession request.
func sessionRequest(who grants.Principal, p protocol.CreateSessionParams) string {
	p.ProgressToken, p.ActiveClient = nil, nil
	return requestDigest(who, "createSession", p)
}

// chatRequest is the digest of a createChat request.
func chatRequest(who grants.Principal, p protocol.CreateChatParams) string {
	return requestDigest(who, "createChat", p)
}
