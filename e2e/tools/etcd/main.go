// Command etcd is the etcd v3.6 server, built from go.etcd.io/etcd/server/v3 for the gpuctl sandbox.
// etcd publishes no installable main at a module path, so this is the smallest possible one over etcdmain.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
