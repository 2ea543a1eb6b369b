//! The peer: Redis from Debian's packages, run by the harness on a
//! loopback port in a temp dir with its strongest durability
//! (`appendonly yes`, `appendfsync always`: the AOF is fsync'd before a
//! write is answered), and a minimal RESP2 client.
//!
//! A hand-written client instead of the `redis` crate: the load needs
//! exactly two halves of one TCP connection (a writer that pipelines up to
//! N commands and a reader that takes the answers in order), the same
//! discipline as the carrier's pipelined `submit-stream`, and RESP2 is a
//! few dozen lines. It adds no dependency to the workspace.

use anyhow::{Context as _, bail};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{
    AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, BufWriter,
};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The durability settings the peer runs with: the append-only file,
/// fsync'd before every write is answered; no RDB snapshots (their fork
/// would only add noise; the AOF is the durability). Everything else is
/// Redis's default (including automatic AOF rewrites).
pub const ARGS: [&str; 6] = [
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisProc {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
}

impl RedisProc {
    /// Starts `bin` with its data in `dir` on a free loopback port.
    ///
    /// # Errors
    /// When it cannot start or does not answer `PING` within 30 s.
    pub async fn start(bin: &Path, dir: &Path) -> anyhow::Result<RedisProc> {
        std::fs::create_dir_all(dir)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(bin)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir)
            .args(ARGS)
            .args(["--daemonize", "no", "--protected-mode", "yes"])
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let redis = RedisProc {
            child,
            addr: format!("127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut c) = Resp::connect(&redis.addr).await
                && let Ok(Reply::Simple(pong)) = c.call(&[b"PING"]).await
                && pong == "PONG"
            {
                return Ok(redis);
            }
            if Instant::now() > deadline {
                bail!("redis-server did not answer PING within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (at most `limit`) until no AOF rewrite or snapshot runs in the
    /// background, so that Redis's background work never lands in the
    /// window of the run that follows (the carrier's, in a pair). Returns
    /// the time waited.
    ///
    /// # Errors
    /// Connection failures.
    pub async fn wait_background(&self, limit: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut c = Resp::connect(&self.addr).await?;
        loop {
            let busy = match c.call(&[b"INFO", b"persistence"]).await? {
                Reply::Bulk(Some(text)) => {
                    let text = String::from_utf8_lossy(&text).into_owned();
                    text.lines().any(|l| {
                        l.strip_suffix(":1").is_some_and(|k| {
                            k == "aof_rewrite_in_progress"
                                || k == "rdb_bgsave_in_progress"
                                || k == "aof_rewrite_scheduled"
                        })
                    })
                }
                other => bail!("INFO persistence: {other:?}"),
            };
            if !busy || start.elapsed() >= limit {
                return Ok(start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for RedisProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The installed `redis-server --version` line.
pub fn version(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// A RESP2 reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+…`
    Simple(String),
    /// `-…`
    Error(String),
    /// `:…`
    Int(i64),
    /// `$…` (`None` for the null bulk string).
    Bulk(Option<Vec<u8>>),
    /// `*…` (`None` for the null array).
    Array(Option<Vec<Reply>>),
}

/// Appends one command in RESP2 array form to `buf`.
pub fn encode(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

/// The reading half of a connection.
#[derive(Debug)]
pub struct RespReader {
    r: BufReader<OwnedReadHalf>,
    line: Vec<u8>,
}

/// The writing half of a connection.
#[derive(Debug)]
pub struct RespWriter {
    w: BufWriter<OwnedWriteHalf>,
    buf: Vec<u8>,
}

/// One connection, both halves.
#[derive(Debug)]
pub struct Resp {
    /// Writer.
    pub writer: RespWriter,
    /// Reader.
    pub reader: RespReader,
}

impl Resp {
    /// Connects to `addr`.
    ///
    /// # Errors
    /// Connection failures.
    pub async fn connect(addr: &str) -> anyhow::Result<Resp> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        Ok(Resp {
            writer: RespWriter {
                w: BufWriter::with_capacity(256 * 1024, w),
                buf: Vec::new(),
            },
            reader: RespReader {
                r: BufReader::with_capacity(256 * 1024, r),
                line: Vec::new(),
            },
        })
    }

    /// One command, one reply.
    ///
    /// # Errors
    /// I/O and protocol errors.
    pub async fn call(&mut self, args: &[&[u8]]) -> anyhow::Result<Reply> {
        self.writer.send(args).await?;
        self.writer.flush().await?;
        self.reader.read().await
    }
}

impl RespWriter {
    /// Buffers one command (written when the buffer fills or on
    /// [`RespWriter::flush`]).
    ///
    /// # Errors
    /// I/O errors.
    pub async fn send(&mut self, args: &[&[u8]]) -> anyhow::Result<()> {
        self.buf.clear();
        encode(&mut self.buf, args);
        self.w.write_all(&self.buf).await?;
        Ok(())
    }

    /// Writes everything buffered.
    ///
    /// # Errors
    /// I/O errors.
    pub async fn flush(&mut self) -> anyhow::Result<()> {
        self.w.flush().await?;
        Ok(())
    }
}

impl RespReader {
    async fn read_line(&mut self) -> anyhow::Result<()> {
        self.line.clear();
        let n = self.r.read_until(b'\n', &mut self.line).await?;
        if n == 0 {
            bail!("redis closed the connection");
        }
        if !self.line.ends_with(b"\r\n") {
            bail!("redis: truncated line");
        }
        self.line.truncate(self.line.len() - 2);
        Ok(())
    }

    fn line_text(&self) -> String {
        String::from_utf8_lossy(self.line.get(1..).unwrap_or_default()).into_owned()
    }

    fn line_int(&self) -> anyhow::Result<i64> {
        self.line_text()
            .parse()
            .map_err(|_| anyhow::anyhow!("redis: bad integer {:?}", self.line_text()))
    }

    /// Reads one reply.
    ///
    /// # Errors
    /// I/O and protocol errors (an error reply is a value, not an error).
    pub async fn read(&mut self) -> anyhow::Result<Reply> {
        // Nested arrays are read with an explicit stack (no async recursion).
        enum Frame {
            Array(usize, Vec<Reply>),
        }
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            self.read_line().await?;
            let mut reply = match self.line.first() {
                Some(b'+') => Reply::Simple(self.line_text()),
                Some(b'-') => Reply::Error(self.line_text()),
                Some(b':') => Reply::Int(self.line_int()?),
                Some(b'$') => {
                    let len = self.line_int()?;
                    if len < 0 {
                        Reply::Bulk(None)
                    } else {
                        let len = usize::try_from(len)?;
                        let mut data = vec![0u8; len + 2];
                        self.r.read_exact(&mut data).await?;
                        data.truncate(len);
                        Reply::Bulk(Some(data))
                    }
                }
                Some(b'*') => {
                    let len = self.line_int()?;
                    if len < 0 {
                        Reply::Array(None)
                    } else if len == 0 {
                        Reply::Array(Some(Vec::new()))
                    } else {
                        let len = usize::try_from(len)?;
                        stack.push(Frame::Array(len, Vec::with_capacity(len)));
                        continue;
                    }
                }
                _ => bail!("redis: unexpected reply line {:?}", self.line_text()),
            };
            // Fold completed replies into their arrays.
            loop {
                match stack.pop() {
                    None => return Ok(reply),
                    Some(Frame::Array(len, mut items)) => {
                        items.push(reply);
                        if items.len() == len {
                            reply = Reply::Array(Some(items));
                        } else {
                            stack.push(Frame::Array(len, items));
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// The XREADGROUP answer for one stream: the entry ids, or none.
///
/// # Errors
/// When the reply is not the shape XREADGROUP answers with.
pub fn xreadgroup_ids(reply: Reply) -> anyhow::Result<Vec<Vec<u8>>> {
    let streams = match reply {
        Reply::Array(None) | Reply::Bulk(None) => return Ok(Vec::new()),
        Reply::Array(Some(streams)) => streams,
        Reply::Error(e) => bail!("XREADGROUP: {e}"),
        other => bail!("XREADGROUP: unexpected {other:?}"),
    };
    let mut ids = Vec::new();
    for stream in streams {
        let Reply::Array(Some(pair)) = stream else {
            bail!("XREADGROUP: stream entry is not a pair");
        };
        let Some(Reply::Array(Some(entries))) = pair.into_iter().nth(1) else {
            bail!("XREADGROUP: no entries array");
        };
        for entry in entries {
            let Reply::Array(Some(fields)) = entry else {
                bail!("XREADGROUP: entry is not an array");
            };
            match fields.into_iter().next() {
                Some(Reply::Bulk(Some(id))) => ids.push(id),
                _ => bail!("XREADGROUP: entry without an id"),
            }
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_resp2_arrays() {
        let mut buf = Vec::new();
        encode(&mut buf, &[b"XADD", b"q:1", b"*", b"e", b"ab"]);
        assert_eq!(
            buf,
            b"*5\r\n$4\r\nXADD\r\n$3\r\nq:1\r\n$1\r\n*\r\n$1\r\ne\r\n$2\r\nab\r\n"
        );
    }

    #[test]
    fn xreadgroup_answers_yield_their_ids() {
        let entry = |id: &[u8]| {
            Reply::Array(Some(vec![
                Reply::Bulk(Some(id.to_vec())),
                Reply::Array(Some(vec![
                    Reply::Bulk(Some(b"e".to_vec())),
                    Reply::Bulk(Some(b"x".to_vec())),
                ])),
            ]))
        };
        let reply = Reply::Array(Some(vec![Reply::Array(Some(vec![
            Reply::Bulk(Some(b"q:1".to_vec())),
            Reply::Array(Some(vec![entry(b"1-0"), entry(b"1-1")])),
        ]))]));
        assert_eq!(
            xreadgroup_ids(reply).expect("shape"),
            vec![b"1-0".to_vec(), b"1-1".to_vec()]
        );
        assert!(xreadgroup_ids(Reply::Array(None)).expect("nil").is_empty());
        assert!(xreadgroup_ids(Reply::Error("ERR".into())).is_err());
    }

    #[tokio::test]
    async fn replies_are_read_in_order_including_nested_arrays() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            socket
                .write_all(b"+PONG\r\n-ERR no\r\n:42\r\n$-1\r\n$3\r\na\r\n\r\n*2\r\n*1\r\n:1\r\n*0\r\n*-1\r\n")
                .await
                .expect("write");
        });
        let mut c = Resp::connect(&addr).await.expect("connect");
        let mut read = Vec::new();
        for _ in 0..7 {
            read.push(c.reader.read().await.expect("reply"));
        }
        server.await.expect("server");
        assert_eq!(
            read,
            vec![
                Reply::Simple("PONG".into()),
                Reply::Error("ERR no".into()),
                Reply::Int(42),
                Reply::Bulk(None),
                Reply::Bulk(Some(b"a\r\n".to_vec())),
                Reply::Array(Some(vec![
                    Reply::Array(Some(vec![Reply::Int(1)])),
                    Reply::Array(Some(Vec::new())),
                ])),
                Reply::Array(None),
            ]
        );
        assert!(
            c.reader.read().await.is_err(),
            "a closed connection is an error"
        );
    }
}
