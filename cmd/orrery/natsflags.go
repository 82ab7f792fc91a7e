package main

import (
	"flag"

	"github.com/getorrery/orrery/config"
)

// natsFlags choose the store and the NATS cluster it lives in, over
// [store] kind and the [nats] table.
type natsFlags struct {
	store, urls, creds, nkey            string
	embed, listen, cluster, clusterAddr string
	routes, name, clusterSecret         string
	replicas                            int
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	n.registerClient(fs)
	fs.StringVar(&n.embed, "nats-embed", "", "with --store jetstream: run a NATS server in this process, its JetStream files in DIR (default [nats] embed)")
	fs.StringVar(&n.listen, "nats-listen", "", "the embedded server's client address, host:port (default [nats] listen; none: only this process connects)")
	fs.StringVar(&n.cluster, "nats-cluster", "", "the cluster NAME the embedded server joins (default [nats] cluster)")
	fs.StringVar(&n.clusterAddr, "nats-cluster-listen", "", "the embedded server's route address, host:port, that the other members' --nats-routes name (default [nats] cluster_listen)")
	fs.StringVar(&n.routes, "nats-routes", "", "the other members' route URLs, nats://HOST:PORT[,…] (default [nats] routes)")
	fs.StringVar(&n.clusterSecret, "nats-cluster-secret", "", "a file holding the secret every member of the cluster shares; routes without it are refused (default [nats] cluster_secret; required off loopback)")
	fs.StringVar(&n.name, "nats-name", "", "the embedded server's name in its cluster, the same across restarts (default [nats] name, then host and route port)")
}

// registerClient registers the flags of a command that only connects to
// a cluster (the store, where NATS is, and how to sign in), not those of
// a node's embedded server.
func (n *natsFlags) registerClient(fs *flag.FlagSet) {
	fs.StringVar(&n.store, "store", "", "the log: sqlite (in the data dir) or jetstream (in NATS, shared by the nodes of a cluster) (default [store] kind, $ORRERY_STORE, then sqlite)")
	fs.StringVar(&n.urls, "nats", "", "with --store jetstream: the NATS servers to join, URL[,URL…] (default [nats] urls, $ORRERY_NATS)")
	fs.StringVar(&n.creds, "nats-creds", "", "a NATS credentials file to connect with (default [nats] creds, $ORRERY_NATS_CREDS)")
	fs.StringVar(&n.nkey, "nats-nkey", "", "a file holding an nkey seed to connect with (default [nats] nkey, $ORRERY_NATS_NKEY)")
	fs.IntVar(&n.replicas, "replicas", 0, "how many servers keep each frame: 3 in a three-server cluster (default [nats] replicas, then 1)")
}

// apply sets the flags given over cfg.
func (n *natsFlags) apply(cfg *config.Config) error {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Store.Kind, n.store)
	if n.urls != "" {
		cfg.NATS.URLs = config.SplitList(n.urls)
	}
	set(&cfg.NATS.Creds, n.creds)
	set(&cfg.NATS.NKey, n.nkey)
	set(&cfg.NATS.Embed, n.embed)
	set(&cfg.NATS.Listen, n.listen)
	set(&cfg.NATS.Cluster, n.cluster)
	set(&cfg.NATS.ClusterListen, n.clusterAddr)
	set(&cfg.NATS.Name, n.name)
	set(&cfg.NATS.ClusterSecret, n.clusterSecret)
	if n.routes != "" {
		cfg.NATS.Routes = config.SplitList(n.routes)
	}
	if n.replicas != 0 {
		cfg.NATS.Replicas = n.replicas
	}
	return nil
}
