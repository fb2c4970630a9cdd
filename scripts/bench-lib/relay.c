// A store-and-forward HTTP relay: the least any gateway must do that has to read a whole request before it may call
// its upstream (Tally must: the hold depends on every image part of the body). On each client connection it reads a
// request to its last byte (Content-Length), writes it unchanged to its upstream connection (one per client
// connection, opened at the first request and kept, as a gateway keeps its upstream's), and copies the answer back as
// it arrives, to its end: its Content-Length, its last chunk, or the upstream's close (which then closes the client's
// connection too); then it reads the client's next request. No parsing beyond the lengths and the chunks' framing, no
// copies beyond one buffer, a thread a connection. scripts/bench-ai measures it beside Tally as the floor of the
// added time of a large upload. With a BUDGET it admits bodies as Tally's `requestBytesInFlight` does: a request
// whose Content-Length would take the bytes of the bodies being relayed past BUDGET is answered 503 `busy` with
// Retry-After (Tally's answer) and its body read and dropped, and the connection closed, so that both relay the same
// number of bodies at once.
//
// usage: relay LISTEN_PORT UPSTREAM_PORT [BUDGET]   (both on 127.0.0.1; prints "ready" once listening)
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static int upstream_port;
static long budget;  // 0: every body is admitted
static long in_flight;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

// Takes length bytes of the budget; 0 when they do not fit.
static int admit(long length) {
  if (budget == 0) return 1;
  pthread_mutex_lock(&lock);
  int fits = in_flight + length <= budget;
  if (fits) in_flight += length;
  pthread_mutex_unlock(&lock);
  return fits;
}

static void give_back(long length) {
  if (budget == 0) return;
  pthread_mutex_lock(&lock);
  in_flight -= length;
  pthread_mutex_unlock(&lock);
}

// The value of the Content-Length header in the header block head[0..length), or -1.
static long content_length(const char *head, size_t length) {
  const char *name = "\r\ncontent-length:";
  size_t name_length = strlen(name);
  for (size_t i = 0; i + name_length < length; i++) {
    if (strncasecmp(head + i, name, name_length) == 0) {
      return strtol(head + i + name_length, NULL, 10);
    }
  }
  return -1;
}

// The length of the header block (through its blank line) in buffer[0..length), or 0 when it is not complete.
static size_t header_end(const char *buffer, size_t length) {
  for (size_t i = 3; i < length; i++) {
    if (buffer[i - 3] == '\r' && buffer[i - 2] == '\n' && buffer[i - 1] == '\r' && buffer[i] == '\n') return i + 1;
  }
  return 0;
}

static int write_all(int fd, const char *data, size_t length) {
  while (length > 0) {
    ssize_t written = write(fd, data, length);
    if (written < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    data += written;
    length -= (size_t)written;
  }
  return 0;
}

// Grows *buffer to hold at least one more byte beyond length. Returns -1 when memory runs out.
static int room(char **buffer, size_t *capacity, size_t length) {
  if (length < *capacity) return 0;
  *capacity *= 2;
  *buffer = realloc(*buffer, *capacity);
  return *buffer == NULL ? -1 : 0;
}

// Reads fd until a header block is complete; returns the bytes read into *buffer (its headers and maybe some body),
// with *head the header block's length, or -1.
static long read_head(int fd, char **buffer, size_t *capacity, size_t *head) {
  size_t length = 0;
  for (;;) {
    if (room(buffer, capacity, length) < 0) return -1;
    ssize_t got = read(fd, *buffer + length, *capacity - length);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    length += (size_t)got;
    *head = header_end(*buffer, length);
    if (*head > 0) return (long)length;
  }
}

// Reads one request whole (its headers and Content-Length bytes of body) into *buffer; returns its length or -1.
// A body the budget cannot take is answered 503 busy (and read to its end and dropped): returns 0.
static long read_request(int fd, char **buffer, size_t *capacity, long *admitted) {
  size_t head = 0;
  long length = read_head(fd, buffer, capacity, &head);
  if (length < 0) return -1;
  long body = content_length(*buffer, head);
  if (body < 0) body = 0;
  if (!admit(body)) {
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                               "Connection: close\r\nContent-Length: 63\r\n\r\n"
                               "{\"error\":{\"code\":\"busy\",\"message\":\"Too many bodies at once.\"}}\n";
    write_all(fd, busy, sizeof busy - 1);
    for (long left = body - (length - (long)head); left > 0;) {
      ssize_t got = read(fd, *buffer, *capacity);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      left -= got;
    }
    return 0;
  }
  *admitted = body;
  size_t total = head + (size_t)body;
  while ((size_t)length < total) {
    if (room(buffer, capacity, (size_t)length) < 0) return -1;
    size_t want = *capacity - (size_t)length;  // never past this request: the next one's bytes stay in the socket
    if (want > total - (size_t)length) want = total - (size_t)length;
    ssize_t got = read(fd, *buffer + length, want);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    length += got;
  }
  return length;
}

// Whether the header block head[0..length) says `Transfer-Encoding: chunked`.
static int is_chunked(const char *head, size_t length) {
  const char *name = "\r\ntransfer-encoding:";
  size_t name_length = strlen(name);
  for (size_t i = 0; i + name_length < length; i++) {
    if (strncasecmp(head + i, name, name_length) != 0) continue;
    for (size_t j = i + name_length; j + 7 <= length && head[j] != '\r'; j++) {
      if (strncasecmp(head + j, "chunked", 7) == 0) return 1;
    }
  }
  return 0;
}

// Where a chunked body's framing stands, byte by byte (RFC 9112 7.1): enough to tell its end.
struct chunks {
  enum { SIZE, EXTENSION, SIZE_LF, DATA, DATA_CR, DATA_LF, TRAILER, TRAILER_LINE, TRAILER_LF, DONE } state;
  long left;  // data bytes left in the current chunk; its size while reading it
  int blank;  // the trailer line being read is empty so far
};

// Feeds data[0..length) to the framing; returns 1 once the last chunk and its trailer have gone by.
static int chunks_feed(struct chunks *c, const char *data, size_t length) {
  for (size_t i = 0; i < length && c->state != DONE; i++) {
    char b = data[i];
    switch (c->state) {
      case SIZE:
        if (b >= '0' && b <= '9') c->left = c->left * 16 + (b - '0');
        else if ((b | 0x20) >= 'a' && (b | 0x20) <= 'f') c->left = c->left * 16 + ((b | 0x20) - 'a' + 10);
        else if (b == '\r') c->state = SIZE_LF;
        else c->state = EXTENSION;
        break;
      case EXTENSION:
        if (b == '\r') c->state = SIZE_LF;
        break;
      case SIZE_LF:
        if (c->left == 0) { c->state = TRAILER; c->blank = 1; }
        else c->state = DATA;
        break;
      case DATA: {
        size_t take = length - i < (size_t)c->left ? length - i : (size_t)c->left;
        c->left -= (long)take;
        i += take - 1;
        if (c->left == 0) c->state = DATA_CR;
        break;
      }
      case DATA_CR: c->state = DATA_LF; break;
      case DATA_LF: c->state = SIZE; c->left = 0; break;
      case TRAILER:  // the start of a trailer line, or the blank line that ends the body
        if (b == '\r') c->state = TRAILER_LF;
        else { c->state = TRAILER_LINE; c->blank = 0; }
        break;
      case TRAILER_LINE:
        if (b == '\r') c->state = TRAILER_LF;
        break;
      case TRAILER_LF:
        if (c->blank) c->state = DONE;
        else { c->state = TRAILER; c->blank = 1; }
        break;
      case DONE: break;
    }
  }
  return c->state == DONE;
}

// Copies one answer from upstream to client as it arrives: its headers, then its body to its end (Content-Length
// bytes, its last chunk, or everything until the upstream closes when it has neither). Returns 1 when both
// connections may carry the next request, 0 when they must close.
static int relay_answer(int upstream, int client, char **buffer, size_t *capacity) {
  size_t head = 0;
  long length = read_head(upstream, buffer, capacity, &head);
  if (length < 0 || write_all(client, *buffer, (size_t)length) < 0) return 0;
  int chunked = is_chunked(*buffer, head);
  struct chunks framing = {.state = SIZE};
  long body = chunked ? -1 : content_length(*buffer, head);
  long left = body < 0 ? -1 : body - (length - (long)head);
  if (chunked && chunks_feed(&framing, *buffer + head, (size_t)length - head)) return 1;
  while (left != 0) {
    size_t want = *capacity;
    if (left > 0 && (size_t)left < want) want = (size_t)left;
    ssize_t got = read(upstream, *buffer, want);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || write_all(client, *buffer, (size_t)got) < 0) return 0;
    if (left > 0) left -= got;
    if (chunked && chunks_feed(&framing, *buffer, (size_t)got)) return 1;
  }
  return !chunked && body >= 0;
}

// A new connection to the upstream, or -1.
static int connect_upstream(void) {
  int upstream = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)upstream_port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(upstream, (struct sockaddr *)&address, sizeof address) != 0) {
    close(upstream);
    return -1;
  }
  return upstream;
}

static void *serve(void *argument) {
  int client = (int)(long)argument;
  size_t capacity = 1 << 20;
  char *buffer = malloc(capacity);
  int upstream = -1;
  for (;;) {
    long admitted = 0;
    long length = read_request(client, &buffer, &capacity, &admitted);
    int again = 0;
    if (length > 0) {
      if (upstream < 0) upstream = connect_upstream();
      again = upstream >= 0 && write_all(upstream, buffer, (size_t)length) == 0 &&
              relay_answer(upstream, client, &buffer, &capacity);
    }
    give_back(admitted);
    if (!again) break;
  }
  if (upstream >= 0) close(upstream);
  free(buffer);
  close(client);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: relay LISTEN_PORT UPSTREAM_PORT [BUDGET]\n");
    return 2;
  }
  upstream_port = atoi(argv[2]);
  budget = argc == 4 ? atol(argv[3]) : 0;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1024) != 0) {
    perror("relay: listen");
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    int client = accept(listener, NULL, NULL);
    if (client < 0) continue;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attributes, serve, (void *)(long)client) != 0) close(client);
    pthread_attr_destroy(&attributes);
  }
}
