import Hummingbird
import NIOCore

extension Response {
    /// This answer to a request whose body was refused unread, then up to `limit` bytes of that body read and dropped
    /// (never held): a client that writes its whole body before reading its answer (Python's `urllib`, which also asks
    /// `Connection: close`) gets the answer, not a connection reset under its upload. Hummingbird reads what is left
    /// of a kept-alive connection's body itself, but closes a `Connection: close` one at once.
    func discardingBody(of request: Request, upTo limit: Int) -> Response {
        var response = self
        let answer = body
        response.body = ResponseBody(contentLength: answer.contentLength) { writer in
            try await answer.write(writer)
            var left = limit
            do {
                for try await part in request.body {
                    left -= part.readableBytes
                    if left < 0 { break }
                }
            } catch {
                // The client went away: nothing more to read.
            }
        }
        return response
    }
}
