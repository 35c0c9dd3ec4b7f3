package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/internal/redact"
)

// newProbeCommand is the health check of containers that serve on loopback
// only, the injected sidecar: the kubelet's HTTP probes connect to the pod
// IP, so the sidecar's probes exec this instead (the image has no shell or
// curl).
func newProbeCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe [--timeout 1s] URL",
		Short: "Exit 0 if an HTTP GET of URL answers 2xx (a health check for exec probes)",
		Long: `probe sends GET URL and exits 0 on a 2xx answer, else prints why and exits 1.
The injected sidecar listens on 127.0.0.1 only, which the kubelet's HTTP probes
cannot reach; its probes run "contextrouter probe http://127.0.0.1:PORT/readyz".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return probe(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Second, "give up after this long")
	return cmd
}

// probeBodyLimit bounds how much of a failed answer is printed.
const probeBodyLimit = 256

func probe(ctx context.Context, rawURL string, timeout time.Duration) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("probe: %q is not an http(s) URL", redact.URL(rawURL))
	}
	if timeout <= 0 {
		return errors.New("--timeout: must be positive")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	// No proxy: the target is this pod's own loopback.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return redact.Error(fmt.Errorf("probe: GET %s: %w", redact.URL(u.String()), err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, probeBodyLimit))
	msg := fmt.Sprintf("probe: GET %s: %s", redact.URL(u.String()), resp.Status)
	if b := strings.TrimSpace(string(body)); b != "" {
		msg += ": " + b
	}
	return errors.New(msg)
}
