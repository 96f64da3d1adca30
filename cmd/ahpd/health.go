package main

import (
	"fmt"
	"net/http"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/host"
)

// handleHealth serves the probes a supervisor (Kubernetes, systemd, a load
// balancer) asks without a token: /healthz answers while the process
// serves at all, /readyz while it takes work (host.Host.Ready; with a
// cluster, the member connected and its heartbeat renewed). Neither says
// more than which part is not ready.
func handleHealth(mux *http.ServeMux, h *host.Host, member *cluster.Member) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		probeAnswer(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		err := h.Ready()
		if err == nil && member != nil {
			if err = member.Healthy(); err != nil {
				err = fmt.Errorf("cluster: %w", err)
			}
		}
		if err != nil {
			probeAnswer(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		probeAnswer(w, http.StatusOK, "ready")
	})
}

func probeAnswer(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, text)
}
