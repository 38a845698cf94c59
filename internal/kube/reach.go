package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// DefaultRequestTimeout is how long gpuctl waits for the API server to answer its first request
// (Reach) when --request-timeout is not set, counted from the first connection attempt: getting
// credentials before it (an exec plugin's login) is not bounded. A server that answers at all answers
// /version in milliseconds; without a bound, a server that accepts connections and never answers
// holds gpuctl forever (kubectl's own default, 0, means no timeout).
const DefaultRequestTimeout = 5 * time.Second

// UnreachableError: the API server could not be reached. The connection was refused, no answer came
// within the request timeout, the host has no address or no route, or TLS failed. An API server that
// answers, even 401 or 403, is reachable: its answer is an error of its own.
//
// It keeps the cause in Err but deliberately does not unwrap to it: client-go's reflector retries a
// refused connection it can see (cache.isWatchErrorRetriable, syscall.ECONNREFUSED) forever, in a
// sleep that ignores cancellation, and gpuctl's informers must give up or back off cancellably
// instead (NewInformer).
type UnreachableError struct {
	// Server is the API server's URL: https://10.0.0.1:6443.
	Server string
	// Reason says what happened: "connection refused", "no answer within 5s".
	Reason string
	// Err is the error the request failed with.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Kubernetes API server at %s: %s", e.Server, e.Reason)
}

// noAnswerError ends a request that got no answer within the request timeout.
type noAnswerError struct{ timeout time.Duration }

func (e *noAnswerError) Error() string { return fmt.Sprintf("no answer within %s", e.timeout) }

// Server is the URL of the API server the clients talk to, as the kubeconfig names it.
func (c *Clients) Server() string {
	u, _, err := rest.DefaultServerUrlFor(c.Config)
	if err != nil {
		return c.Config.Host
	}
	return strings.TrimSuffix(u.String(), "/")
}

// Reach makes sure the API server answers before gpuctl's first real request: one GET /version,
// the cheapest request every API server answers (to anyone, through system:public-info-viewer),
// bounded by the request timeout (Config.Timeout, from --request-timeout, else
// DefaultRequestTimeout). It fails with an *UnreachableError when no answer came, and names the
// server when it did not accept the credentials (401). Any other answer, 403 included, means
// reachable: what the user may do is for the requests that need it to say.
func (c *Clients) Reach(ctx context.Context) error {
	_, err := c.ServerVersion(ctx)
	var status apierrors.APIStatus
	if errors.As(err, &status) && !apierrors.IsUnauthorized(err) {
		return nil
	}
	return err
}

// ServerVersion asks the API server for its version, bounded by the request timeout as Reach is.
// It fails with an *UnreachableError when no answer came; with the server's answer, naming the
// server, when that was an error.
func (c *Clients) ServerVersion(ctx context.Context) (*version.Info, error) {
	server := c.Server()
	timeout := c.Config.Timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	rc, err := versionClient(c.Config)
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes API server at %s: %w", server, err)
	}

	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	trace, stop := noAnswerDeadline(timeout, cancel)
	defer stop()
	raw, err := rc.Get().AbsPath("/version").MaxRetries(0).
		Do(httptrace.WithClientTrace(reqCtx, trace)).Raw()
	if err != nil {
		return nil, versionError(ctx, reqCtx, server, err)
	}
	var info version.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("the Kubernetes API server at %s: decode /version: %w", server, err)
	}
	return &info, nil
}

// versionClient is a client for the API server's unversioned paths (/version) with config's
// credentials and no timeout of its own: ServerVersion bounds its request (noAnswerDeadline).
func versionClient(config *rest.Config) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(config)
	// The bound starts at the first connection attempt (noAnswerDeadline) rather than with the
	// request, as http.Client's Timeout would, so that an exec plugin's login is not cut short. (Not
	// client-go's discovery client: it sets a Timeout of 32 s.)
	cfg.Timeout = 0
	cfg.GroupVersion, cfg.APIPath = nil, ""
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.UnversionedRESTClientFor(cfg)
}

// noAnswerDeadline is the request timeout counted from a request's first connection attempt: the
// trace that starts it, and stop, which ends it. A request still unanswered when it runs out is
// cancelled with a *noAnswerError as its cause.
func noAnswerDeadline(timeout time.Duration, cancel context.CancelCauseFunc) (trace *httptrace.ClientTrace, stop func()) {
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	trace = &httptrace.ClientTrace{GetConn: func(string) {
		mu.Lock()
		defer mu.Unlock()
		if timer == nil {
			timer = time.AfterFunc(timeout, func() { cancel(&noAnswerError{timeout}) })
		}
	}}
	stop = func() {
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
	}
	return trace, stop
}

// versionError is ServerVersion's error for a /version request that failed with err: the caller's
// cancellation, an *UnreachableError when no answer came (reqCtx's cause says whether the deadline
// ended it), or the server's answer naming the server.
func versionError(ctx, reqCtx context.Context, server string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("reach the Kubernetes API server at %s: %w", server, ctx.Err())
	}
	var noAnswer *noAnswerError
	if errors.As(context.Cause(reqCtx), &noAnswer) {
		return &UnreachableError{Server: server, Reason: noAnswer.Error(), Err: err}
	}
	if apierrors.IsUnauthorized(err) {
		return fmt.Errorf("the Kubernetes API server at %s did not accept the credentials (check the kubeconfig's user, or log in again): %w", server, err)
	}
	if u := unreachable(err); u != nil {
		u.Server = server
		return u
	}
	return fmt.Errorf("the Kubernetes API server at %s: %w", server, err)
}

// unreachable is err as an *UnreachableError when it says that the request never got an answer
// (a failure to connect, resolve, route, speak TLS, or one that timed out), else nil. The server is
// the request's URL up to its API path.
func unreachable(err error) *UnreachableError {
	if err == nil {
		return nil
	}
	var u *UnreachableError
	if errors.As(err, &u) {
		return u
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) || errors.Is(err, context.Canceled) {
		return nil
	}
	var urlErr *url.Error
	if !errors.As(err, &urlErr) {
		return nil
	}
	reason := unreachableReason(urlErr.Err)
	if reason == "" {
		return nil
	}
	return &UnreachableError{Server: serverOf(urlErr.URL), Reason: reason, Err: err}
}

// unreachableReason says in a few words why a request got no answer, or "" when err is no such
// failure (an exec plugin's, say).
func unreachableReason(err error) string {
	var (
		errno    syscall.Errno
		dns      *net.DNSError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		op       *net.OpError
		netErr   net.Error
	)
	switch {
	case errors.As(err, &errno) && errno == syscall.ECONNREFUSED:
		return "connection refused"
	case errors.As(err, &errno) && (errno == syscall.EHOSTUNREACH || errno == syscall.ENETUNREACH || errno == syscall.ECONNRESET):
		return errno.Error()
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name + ": " + dns.Err
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &alert):
		return err.Error() // "tls: failed to verify certificate: x509: …"
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http turns the TLS record error of a server that answered in plain HTTP into an
		// error of no type of its own (net/http transport.go), so its words are all there is.
		return "it speaks HTTP, not HTTPS, there"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timed out: " + err.Error()
	case errors.As(err, &op):
		return op.Err.Error()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection was closed before an answer"
	}
	return ""
}

// serverOf is a request's URL up to its API path: https://host:6443/api/v1/nodes?… is
// https://host:6443, and a proxy's https://rancher/k8s/clusters/c-1/apis/… is https://rancher/k8s/clusters/c-1.
func serverOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	base := ""
	for _, s := range segs {
		if s == "api" || s == "apis" || s == "version" || s == "" {
			break
		}
		base += "/" + s
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: base}).String()
}
