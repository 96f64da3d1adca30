package protocol

import (
	"iter"
	"maps"
	"slices"
)

// Map is a JSON object of one value type whose members keep their order.
// Order is part of what a peer says: a client draws config properties in
// the order they arrive. The zero Map is absent on the wire; a Map made by
// NewMap or Set is present, even when empty.
type Map[V any] struct {
	keys []string
	vals map[string]V
}

// NewMap returns an empty, present Map.
func NewMap[V any]() Map[V] { return Map[V]{vals: map[string]V{}} }

// IsZero reports whether m is absent.
func (m Map[V]) IsZero() bool { return m.vals == nil }

// Len returns the number of members.
func (m Map[V]) Len() int { return len(m.keys) }

// Get returns the value of key.
func (m Map[V]) Get(key string) (V, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// Keys returns the member names in order.
func (m Map[V]) Keys() []string { return slices.Clone(m.keys) }

// All yields the members in order.
func (m Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, k := range m.keys {
			if !yield(k, m.vals[k]) {
				return
			}
		}
	}
}

// Set sets key to v; a new key goes last. Set changes m in place: a Map
// held by a state must be cloned first.
func (m *Map[V]) Set(key string, v V) {
	if m.vals == nil {
		m.vals = map[string]V{}
	}
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
}

// Delete removes key, in place like Set.
func (m *Map[V]) Delete(key string) {
	if _, ok := m.vals[key]; !ok {
		return
	}
	delete(m.vals, key)
	m.keys = slices.DeleteFunc(m.keys, func(k string) bool { return k == key })
}

// Clone returns a copy of m that can be changed without changing m.
func (m Map[V]) Clone() Map[V] {
	if m.vals == nil {
		return Map[V]{}
	}
	return Map[V]{keys: slices.Clone(m.keys), vals: maps.Clone(m.vals)}
}

func decodeMap[T any](d *decoder, fn func(*decoder) (T, error)) (Map[T], error) {
	if err := d.beginObject(); err != nil {
		return Map[T]{}, err
	}
	out := NewMap[T]()
	for d.more() {
		name, err := d.name()
		if err != nil {
			return Map[T]{}, err
		}
		key := string(name)
		v, err := fn(d)
		if err != nil {
			return Map[T]{}, inField(key, err)
		}
		out.Set(key, v)
	}
	return out, d.endObject()
}

func mapOf[T any](fn func(*decoder) (T, error)) func(*decoder) (Map[T], error) {
	return func(d *decoder) (Map[T], error) { return decodeMap(d, fn) }
}
