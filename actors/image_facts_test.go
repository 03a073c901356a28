package actors

import "testing"

// The per-image record is bounded (the oldest image goes first), keeps only what resolved or
// passed, and is keyed by image ID alone.
func TestImageFactsBoundedAndKeyedByID(t *testing.T) {
	c := newImageFacts(2)
	c.setIdentity("sha256:a", "sandbox", facts{uid: 1000, gid: 1000, resolved: true})
	c.setIdentity("sha256:a", "ghost", facts{})
	c.setProbed("sha256:a", "rm")
	c.setMissing("sha256:a", "/w", []string{"/w"})
	if f, ok := c.identity("sha256:a", "sandbox"); !ok || f.uid != 1000 {
		t.Fatalf("identity = %+v %v, want uid 1000", f, ok)
	}
	if _, ok := c.identity("sha256:a", "ghost"); ok {
		t.Fatal("an unresolved identity was kept")
	}
	if _, ok := c.identity("sha256:b", "sandbox"); ok {
		t.Fatal("another image ID was served image a's identity")
	}
	if m, ok := c.missing("sha256:a", "/w"); !ok || len(m) != 1 {
		t.Fatalf("missing = %v %v", m, ok)
	}
	m, _ := c.missing("sha256:a", "/w")
	m[0] = "changed"
	if again, _ := c.missing("sha256:a", "/w"); again[0] != "/w" {
		t.Fatal("a caller's copy changed the record")
	}
	if !c.probed("sha256:a")["rm"] {
		t.Fatal("passed probe not kept")
	}
	c.setProbed("sha256:b", "sh")
	c.setProbed("sha256:c", "sh") // evicts a, the oldest
	if _, ok := c.identity("sha256:a", "sandbox"); ok || len(c.probed("sha256:a")) != 0 {
		t.Fatal("the oldest image was not evicted at the bound")
	}
	if !c.probed("sha256:c")["sh"] || !c.probed("sha256:b")["sh"] {
		t.Fatal("the newer images were lost")
	}
	c.setProbed("", "sh")
	if len(c.probed("")) != 0 {
		t.Fatal("an empty image ID was recorded")
	}
}
