package placement

import "github.com/nats-io/nats.go/jetstream"

// Bucket and SetBucket let a test wrap a store's bucket, to answer its reads as a replica
// behind the stream's last writes would.
func Bucket(s *Store) jetstream.KeyValue { return s.kv }

func SetBucket(s *Store, kv jetstream.KeyValue) { s.kv = kv }
