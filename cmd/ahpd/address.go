package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/internal/atomicfile"
)

// clientURL is the address a local client dials for a listener: an
// unspecified IP (0.0.0.0, ::) is reached on loopback.
func clientURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return "ws://" + addr.String()
	}
	ip := net.IPv4(127, 0, 0, 1)
	if tcp.IP.To4() == nil {
		ip = net.IPv6loopback
	}
	return "ws://" + (&net.TCPAddr{IP: ip, Port: tcp.Port}).String()
}

// recordAddress writes url to the state directory's address file, for
// local clients (ahpd run, ahpd ls) to find the daemon: atomically, so a
// reader never sees half of it. The returned function removes it at exit,
// unless another daemon has written its own since.
func recordAddress(stateDir, url string) (func(), error) {
	path := filepath.Join(stateDir, client.AddressFile)
	data := []byte(url + "\n")
	if err := atomicfile.Write(path, data, nil); err != nil {
		return nil, fmt.Errorf("recording the address: %w", err)
	}
	return func() {
		if now, err := os.ReadFile(path); err == nil && bytes.Equal(now, data) {
			_ = os.Remove(path)
		}
	}, nil
}
