package paths

// Owner is the ownership of one walked component, as the reach rule needs it.
type Owner struct {
	Path string // for messages and logs only
	UID  int
	Mode int64 // permission bits as the engine reports them (a tar header's or a stat's mode)
}

// HostOwned is the reach rule of protocol §6.5: an operation may run with more authority than
// the guest program's only when every component on the walked path is owned by uid 0 and
// writable by nobody else (mode & 0o022 == 0), so the guest could not have swapped any of
// them. An empty set of components is decided by the caller, explicitly, through
// emptyMeansHostOwned.
func HostOwned(entries []Owner, emptyMeansHostOwned bool) bool {
	if len(entries) == 0 {
		return emptyMeansHostOwned
	}
	for _, e := range entries {
		if e.UID != 0 || e.Mode&0o022 != 0 {
			return false
		}
	}
	return true
}
