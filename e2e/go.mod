module github.com/replaybus/replaybus/e2e

go 1.26.0

replace github.com/replaybus/replaybus => ..

replace github.com/replaybus/replaybus/adapters/nats => ../adapters/nats

replace github.com/replaybus/replaybus/examples => ../examples

require github.com/replaybus/replaybus v0.0.0-00010101000000-000000000000

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/replaybus/replaybus/examples v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
