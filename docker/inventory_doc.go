package docker

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The inventory's reading of the engine's inspect documents and daemon ID, from the raw
// answer.

// inventoryContainerDoc is the part of `container inspect` the inventory reads.
type inventoryContainerDoc struct {
	ID      string `json:"Id"`
	Name    string `json:"Name"`
	Created string `json:"Created"`
	State   struct {
		Running bool `json:"Running"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

// inventoryNetworkDoc is the part of `network inspect` the inventory reads.
type inventoryNetworkDoc struct {
	ID         string                     `json:"Id"`
	Name       string                     `json:"Name"`
	Created    string                     `json:"Created"`
	Labels     map[string]string          `json:"Labels"`
	Containers map[string]json.RawMessage `json:"Containers"`
}

// resource is the container's [Resource]: its name without the engine's leading slash, its
// labels never nil.
func (d inventoryContainerDoc) resource() Resource {
	r := Resource{ID: d.ID, Name: strings.TrimPrefix(d.Name, "/"), Labels: d.Config.Labels,
		Created: d.Created, Running: d.State.Running}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	return r
}

// resource is the network's [Resource]: its labels never nil, its containers' IDs sorted.
func (d inventoryNetworkDoc) resource() Resource {
	r := Resource{ID: d.ID, Name: d.Name, Labels: d.Labels, Created: d.Created,
		Containers: make([]string, 0, len(d.Containers))}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	for cid := range d.Containers {
		r.Containers = append(r.Containers, cid)
	}
	sort.Strings(r.Containers)
	return r
}

// engineID refuses a daemon ID that is empty or holds white space.
func engineID(answer string) (string, error) {
	id := strings.TrimSpace(answer)
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		return "", fmt.Errorf("engine id: unreadable answer %q", id)
	}
	return id, nil
}

// decodeInventoryDoc decodes raw into doc, an inspect document of the inventory.
func decodeInventoryDoc[T any](raw []byte) (T, error) {
	var doc T
	if err := json.Unmarshal(raw, &doc); err != nil {
		return doc, fmt.Errorf("unreadable answer: %w", err)
	}
	return doc, nil
}
