package driverimage

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeRegistry answers the tag list API for repository nvidia/driver, asking for user:secret when
// login is set; block makes every request wait until the test ends.
func fakeRegistry(t *testing.T, login bool, block bool) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if block {
			select {
			case <-done:
			case <-r.Context().Done():
			}
			return
		}
		if u, p, ok := r.BasicAuth(); login && (!ok || u != "user" || p != "secret") {
			w.Header().Set("Www-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/v2/nvidia/driver/tags/list" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "nvidia/driver", "tags": []string{"595-6.8.0-60-generic-ubuntu24.04", "595.91.07-ubuntu24.04"}})
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestTags(t *testing.T) {
	ctx := context.Background()
	want := []string{"595-6.8.0-60-generic-ubuntu24.04", "595.91.07-ubuntu24.04"}
	t.Run("a loopback registry is asked in plain HTTP and lists its tags", func(t *testing.T) {
		host := fakeRegistry(t, false, false)
		got, err := (&Registry{}).Tags(ctx, host+"/nvidia/driver", nil)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Tags = %v, %v; want %v", got, err, want)
		}
	})
	t.Run("a pull secret's login for the registry is used", func(t *testing.T) {
		host := fakeRegistry(t, true, false)
		cfg := []byte(`{"auths":{"other.example":{"auth":"eDp5"},"` + host + `":{"auth":"dXNlcjpzZWNyZXQ="}}}`)
		got, err := (&Registry{}).Tags(ctx, host+"/nvidia/driver", [][]byte{[]byte("not json"), cfg})
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Tags = %v, %v; want %v", got, err, want)
		}
		if _, err := (&Registry{}).Tags(ctx, host+"/nvidia/driver", nil); err == nil {
			t.Fatal("Tags without the login succeeded, want the registry's refusal")
		}
	})
	t.Run("a repository the registry does not have is ErrNoRepository", func(t *testing.T) {
		host := fakeRegistry(t, false, false)
		_, err := (&Registry{}).Tags(ctx, host+"/nvidia/other", nil)
		if !errors.Is(err, ErrNoRepository) {
			t.Fatalf("Tags = %v, want ErrNoRepository", err)
		}
	})
	t.Run("a registry that does not answer gives up at the timeout", func(t *testing.T) {
		host := fakeRegistry(t, false, true)
		_, err := (&Registry{Timeout: 200 * time.Millisecond}).Tags(ctx, host+"/nvidia/driver", nil)
		if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
			t.Fatalf("Tags = %v, want no answer within the timeout", err)
		}
	})
	t.Run("a refused connection is an error, not ErrNoRepository", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		host := l.Addr().String()
		l.Close()
		_, err = (&Registry{}).Tags(ctx, host+"/nvidia/driver", nil)
		if err == nil || errors.Is(err, ErrNoRepository) {
			t.Fatalf("Tags = %v, want a connection error", err)
		}
	})
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1:5000": true, "localhost": true, "[::1]:5000": true, "nvcr.io": false, "10.0.0.1:5000": false} {
		if got := loopback(host); got != want {
			t.Errorf("loopback(%q) = %v, want %v", host, got, want)
		}
	}
}
