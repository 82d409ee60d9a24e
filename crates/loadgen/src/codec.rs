//! A `tonic` codec over already-encoded messages: the request is protobuf bytes made once before the run,
//! and the response is skipped, only its length kept. Per-request work is then the transport alone (HTTP/2
//! framing, the 5-byte gRPC prefix, the network), not message encoding or decoding.

use bytes::{Buf, BufMut, Bytes};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Sends [`Bytes`] as they are; decodes a response to its length in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = usize;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RawDecoder;

impl Decoder for RawDecoder {
    type Item = usize;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<usize>, Status> {
        // tonic hands over exactly one whole message: skip it.
        let n_bytes = src.remaining();
        src.advance(n_bytes);
        Ok(Some(n_bytes))
    }
}
