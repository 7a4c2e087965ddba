package deltalog

import (
	"encoding/json"
	"testing"
)

func TestProtocolWithFeatures(t *testing.T) {
	tests := []struct {
		name string
		in   Protocol
		add  []string
		want string
	}{
		{"legacy 1,2 + timestampNtz", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, []string{"timestampNtz"},
			`{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["timestampNtz"],"writerFeatures":["appendOnly","invariants","timestampNtz"]}`},
		{"legacy 2,5 + typeWidening keeps columnMapping", Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, []string{"typeWidening"},
			`{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["columnMapping","typeWidening"],"writerFeatures":["appendOnly","invariants","checkConstraints","changeDataFeed","generatedColumns","columnMapping","typeWidening"]}`},
		{"already there", Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz"}}, []string{"timestampNtz"},
			`{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["timestampNtz"],"writerFeatures":["timestampNtz"]}`},
		{"implied by legacy writer 5", Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, []string{"columnMapping"},
			`{"minReaderVersion":2,"minWriterVersion":5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.WithFeatures(tt.add...)
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("got  %s\nwant %s", b, tt.want)
			}
			for _, f := range tt.add {
				if !got.HasFeature(f) {
					t.Errorf("HasFeature(%s) false after WithFeatures", f)
				}
			}
		})
	}
}
