package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuctl/gpuctl/internal/kube/kubetest"
)

// guard bounds each call against an unreachable server: one that ends it failed the test.
const guard = 60 * time.Second

func TestServerVersionAndReach(t *testing.T) {
	answering := func(status int, body string) string {
		s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/version" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	plainHTTP := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plainHTTP.Close)
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes it fails are the point
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	status := func(code int, reason string) string {
		return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
	}

	for _, tc := range []struct {
		name     string
		server   string
		insecure bool
		timeout  time.Duration
		// want: the version; or reason, the UnreachableError's; or check, for other errors.
		version  string
		reason   string
		check    func(error) bool
		reachErr bool // Reach fails too
	}{
		{name: "an answering server says its version", server: answering(200, `{"gitVersion":"v1.33.1"}`), insecure: true, version: "v1.33.1"},
		{name: "a refused connection is unreachable", server: refusing(t), insecure: true, reason: "connection refused", reachErr: true},
		{name: "a server that never answers is unreachable after the request timeout", server: blackhole(t), insecure: true,
			timeout: 300 * time.Millisecond, reason: "no answer within 300ms", reachErr: true},
		{name: "a port that speaks HTTP, not TLS, is unreachable", server: strings.Replace(plainHTTP.URL, "http:", "https:", 1), insecure: true,
			reason: "it speaks HTTP, not HTTPS, there", reachErr: true},
		{name: "a certificate not trusted is unreachable, and says why", server: untrusted.URL,
			reason: "tls: failed to verify certificate: x509: certificate signed by unknown authority", reachErr: true},
		{name: "401 is no unreachability: it names the server and stays Unauthorized", server: answering(401, status(401, "Unauthorized")), insecure: true,
			check: func(err error) bool {
				return apierrors.IsUnauthorized(err) && strings.Contains(err.Error(), "did not accept the credentials")
			}, reachErr: true},
		{name: "403 on /version is an answer: reachable", server: answering(403, status(403, "Forbidden")), insecure: true,
			check: apierrors.IsForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Clients{Config: &rest.Config{Host: tc.server, Timeout: tc.timeout, TLSClientConfig: rest.TLSClientConfig{Insecure: tc.insecure}}}
			ctx, cancel := context.WithTimeout(t.Context(), guard)
			defer cancel()
			info, err := c.ServerVersion(ctx)
			if ctx.Err() != nil {
				t.Fatalf("ServerVersion still ran after %s", guard)
			}
			var u *UnreachableError
			switch {
			case tc.version != "":
				if err != nil || info.GitVersion != tc.version {
					t.Fatalf("ServerVersion = %v, %v; want %s", info, err, tc.version)
				}
			case tc.reason != "":
				if !errors.As(err, &u) || u.Server != tc.server || u.Reason != tc.reason {
					t.Fatalf("ServerVersion: %v, want an UnreachableError naming %s: %s", err, tc.server, tc.reason)
				}
				if utilnet.IsConnectionRefused(err) {
					t.Errorf("the error unwraps to ECONNREFUSED, which client-go's reflector retries forever")
				}
			default:
				if errors.As(err, &u) || !tc.check(err) || !strings.Contains(err.Error(), tc.server) {
					t.Fatalf("ServerVersion: %v, want the server's answer, naming %s", err, tc.server)
				}
			}
			if err := c.Reach(ctx); (err != nil) != tc.reachErr {
				t.Errorf("Reach = %v, want an error: %v", err, tc.reachErr)
			}
		})
	}

	t.Run("Ctrl-C while waiting for an answer is an interruption, not unreachability", func(t *testing.T) {
		accepted := make(chan struct{}, 1)
		c := &Clients{Config: &rest.Config{Host: kubetest.Blackhole(t, accepted), Timeout: time.Hour, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}}
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-accepted // Reach is waiting for the answer: interrupt it
			cancel()
		}()
		err := c.Reach(ctx)
		var u *UnreachableError
		if !errors.Is(err, context.Canceled) || errors.As(err, &u) {
			t.Fatalf("Reach = %v, want context.Canceled", err)
		}
	})
}

// TestListNodesUnreachable: against an API server that refuses connections, ListNodes reports it at
// once as an UnreachableError naming the server: client-go's informer alone would retry forever.
func TestListNodesUnreachable(t *testing.T) {
	server := refusing(t)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	_, err = ListNodes(ctx, c, func(n *corev1.Node) *corev1.Node { return n })
	if ctx.Err() != nil {
		t.Fatalf("ListNodes still ran after %s: %v", guard, err)
	}
	var u *UnreachableError
	if !errors.As(err, &u) || u.Server != server || u.Reason != "connection refused" {
		t.Fatalf("ListNodes: %v, want an UnreachableError naming %s", err, server)
	}
}

// TestInformerReportsRefusedConnections: an informer (as the health waits run them) against an API
// server that refuses connections hands each failure to its watch error handler and stops when its
// context ends. client-go's reflector alone retries a refused streaming list inside, in a sleep that
// ignores the context, and never reports it.
func TestInformerReportsRefusedConnections(t *testing.T) {
	c, err := kubernetes.NewForConfig(&rest.Config{Host: refusing(t), TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	inf := NewInformer("nodes", c, &corev1.Node{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.CoreV1().Nodes().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Nodes().Watch(ctx, o)
		})
	reported := make(chan error, 1)
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		select {
		case reported <- err:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(runCtx)
	}()
	select {
	case err := <-reported:
		var u *UnreachableError
		if !errors.As(err, &u) || u.Reason != "connection refused" {
			t.Errorf("the handler got %v, want an UnreachableError", err)
		}
	case <-ctx.Done():
		t.Errorf("no error reached the watch error handler in %s", guard)
	}
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the informer still ran %s after its context ended", guard)
	}
}

func TestServerOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://10.0.0.1:6443/api/v1/nodes?watch=true":                     "https://10.0.0.1:6443",
		"https://10.0.0.1:6443/apis/apps/v1/deployments":                    "https://10.0.0.1:6443",
		"https://10.0.0.1:6443/version":                                     "https://10.0.0.1:6443",
		"https://rancher.example/k8s/clusters/c-1/apis/nvidia.com/v1/x":     "https://rancher.example/k8s/clusters/c-1",
		"https://rancher.example/k8s/clusters/c-1/api/v1/namespaces/a/pods": "https://rancher.example/k8s/clusters/c-1",
	} {
		if got := serverOf(in); got != want {
			t.Errorf("serverOf(%s) = %s, want %s", in, got, want)
		}
	}
}

// refusing is the URL of a server that refuses connections: a port opened and closed again.
func refusing(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "https://" + addr
}

// blackhole is the URL of a server that accepts connections and never answers, until the test ends.
func blackhole(t *testing.T) string {
	t.Helper()
	return kubetest.Blackhole(t, nil)
}
