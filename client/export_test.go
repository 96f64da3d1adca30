package client

// DropConnection ends the client's connection as a network failure would,
// leaving the client to reconnect.
func DropConnection(c *Client) {
	c.mu.Lock()
	cn := c.conn
	c.mu.Unlock()
	_ = cn.w.(wsWire).ws.CloseNow()
	<-cn.done
}
