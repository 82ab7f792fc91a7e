package hub

// Entries counts the entries of h's per-address state, for tests that
// check the hub does not grow: mailboxes, topic subscriptions (one per
// subscriber of a topic), topics with subscribers, sends waiting, joined
// addresses, pinned addresses and remembered ended addresses.
func Entries(h *Hub) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := 0
	for _, s := range h.topics {
		subs += len(s)
	}
	return map[string]int{
		"boxes":   len(h.boxes),
		"subs":    subs,
		"topics":  len(h.topics),
		"waiting": len(h.waiting),
		"holders": len(h.holders),
		"pinned":  len(h.pinned),
		"ended":   len(h.ended.at),
	}
}
