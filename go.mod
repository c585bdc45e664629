module github.com/replaybus/replaybus

go 1.26.0

require (
	github.com/caarlos0/env/v11 v11.4.2
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require github.com/coder/websocket v1.8.15

require github.com/puzpuzpuz/xsync/v3 v3.5.1

require github.com/goccy/go-json v0.12.0

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	pgregory.net/rapid v1.3.0
)
