package config

// StoreCluster is the value of gateway.pinning.store and gateway.tokenStore.store that keeps
// their state in the cluster's shared store (gateway.cluster.store).
const StoreCluster = "cluster"

// sharedStores checks gateway.pinning.store and gateway.tokenStore.store: "cluster" only, not
// with a file, and only where there is a shared store to keep them.
func (v *validator) sharedStores(g *Gateway) {
	for _, s := range []struct{ key, store, file string }{
		{"gateway.pinning", g.Pinning.Store, g.Pinning.File},
		{"gateway.tokenStore", g.TokenStore.Store, g.TokenStore.File},
	} {
		switch {
		case s.store == "":
		case s.store != StoreCluster:
			v.add(s.key+".store", "must be cluster (the cluster's shared store); for one instance set file instead")
		case s.file != "":
			v.add(s.key+".store", "set store or file, not both")
		case !g.Cluster.Enabled() || g.Cluster.Store == "":
			v.add(s.key+".store", "cluster needs cluster mode with a shared store (gateway.cluster.store: redis://…); for one instance set file instead")
		}
	}
}
