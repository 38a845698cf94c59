// Package kubetest holds test doubles for the network under client-go that more than one package's
// tests need. Tests only; nothing in gpuctl imports it.
package kubetest

import (
	"net"
	"sync"
	"testing"
)

// Blackhole is the https URL of a server that accepts connections and never answers (it reads
// nothing and writes nothing) until the test ends: an API server that stopped answering. Each
// accepted connection is announced on accepted, when it is not nil and has room.
func Blackhole(t *testing.T, accepted chan<- struct{}) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if accepted != nil {
				select {
				case accepted <- struct{}{}:
				default:
				}
			}
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "https://" + l.Addr().String()
}
