# The HTTP server of crates/privsvc-rt/tests/wasm.rs (started by scripts/wasm-check.sh on
# 127.0.0.1; prints its port): /target answers 200 "landed", /redirect answers 307 to /target,
# anything else never answers within the test.
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == '/redirect':
            self.send_response(307); self.send_header('location', '/target')
            self.send_header('content-length', '0'); self.end_headers()
        elif self.path == '/target':
            self.send_response(200); self.send_header('content-length', '6'); self.end_headers()
            self.wfile.write(b'landed')
        else:
            time.sleep(30)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
