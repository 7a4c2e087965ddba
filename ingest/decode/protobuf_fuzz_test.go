package decode

import "testing"

// FuzzProtobuf feeds arbitrary bytes after the Confluent frame of a Protobuf record (the
// message-index array, then the body) of the rich schema: it must never panic, must
// return a reasoned *Error or exactly one row, must roll back on failure, and never
// transcode beyond the stated bound (maxExpandFixed + maxExpandFactor × the body).
func FuzzProtobuf(f *testing.F) {
	ws := mustProto(f, pbRich, nil)
	valid := pbBody(f, ws, `{"b":true,"i32":-5,"u64":"18446744073709551615","s":"x","color":7,"opt":1,"num":"2","counts":{"a":1},
	 "by_id":{"3":{"name":"n"}},"tags":["t"],"items":[{}],"ts":"2024-01-01T00:00:00.5Z","dur":"1s","w_u64":"3","st":{"a":[1]},"val":null,
	 "any":{"@type":"type.googleapis.com/google.protobuf.Empty"},"inner":{"name":"i"},"nothing":{}}`)
	f.Add(append([]byte{0}, valid...))
	f.Add(append([]byte{2, 0}, valid...))
	f.Add([]byte{2, 2, 0x0a, 1, 'v', 0x12, 2, 0x0a, 0}) // Node: refused per schema (recursive)
	f.Add([]byte{6, 4, 0, 0, 8, 1})                     // Outer.Mid.Leaf {n: 1}
	f.Add([]byte{0, 0x9a, 1, 0})                        // items: one empty message
	f.Add([]byte{})
	decs := map[int]*transcodingFuzz{}
	var arena Arena
	arena.AliasPayloads()
	f.Fuzz(func(t *testing.T, in []byte) {
		msg, body, err := ws.Message(in)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("message index error without a reason: %v", err)
			}
			return
		}
		if msg.DeltaErr != nil {
			return // refused per schema id
		}
		checkExpansion(t, msg, body)
		c := decs[msg.Key()]
		if c == nil {
			c = newTranscodingFuzz(t, msg)
			decs[msg.Key()] = c
		}
		c.decode(t, &arena, body)
		// A message without fields (a top-level record may have none: its table's columns
		// can be Kafka columns alone) decodes to no column.
		if len(c.cols) > 0 && c.cols[0].Len() > 1<<16 {
			for i := range c.cols {
				c.cols[i].Truncate(0)
			}
			arena.Reset()
		}
	})
}
