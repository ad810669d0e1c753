# Independent review of conformance/core/envelope.json (envelope v2) and window.json: pure-Python
# keccak256, JCS via json.dumps, secp256k1 public-key recovery and the time rules written out
# again; nothing shared with the Rust code.
# Usage: python3 conformance/core/independent_check.py conformance/core/envelope.json [conformance/core/window.json]
import json, base64, sys

RC = [0x0000000000000001,0x0000000000008082,0x800000000000808A,0x8000000080008000,0x000000000000808B,0x0000000080000001,0x8000000080008081,0x8000000000008009,0x000000000000008A,0x0000000000000088,0x0000000080008009,0x000000008000000A,0x000000008000808B,0x800000000000008B,0x8000000000008089,0x8000000000008003,0x8000000000008002,0x8000000000000080,0x000000000000800A,0x800000008000000A,0x8000000080008081,0x8000000000008080,0x0000000080000001,0x8000000080008008]
ROT = [[0,36,3,41,18],[1,44,10,45,2],[62,6,43,15,61],[28,55,25,21,56],[27,20,39,8,14]]
M = (1<<64)-1
def rol(x,n): return ((x<<n)|(x>>(64-n)))&M if n else x
def keccak_f(A):
    for rc in RC:
        C=[A[x][0]^A[x][1]^A[x][2]^A[x][3]^A[x][4] for x in range(5)]
        D=[C[(x-1)%5]^rol(C[(x+1)%5],1) for x in range(5)]
        A=[[A[x][y]^D[x] for y in range(5)] for x in range(5)]
        B=[[0]*5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                B[y][(2*x+3*y)%5]=rol(A[x][y],ROT[x][y])
        A=[[B[x][y]^((~B[(x+1)%5][y])&B[(x+2)%5][y]) for y in range(5)] for x in range(5)]
        A[0][0]^=rc
    return A
def keccak256(data):
    rate=136
    p=bytearray(data)+b'\x01'
    while len(p)%rate: p+=b'\x00'
    p[-1]|=0x80
    A=[[0]*5 for _ in range(5)]
    for off in range(0,len(p),rate):
        blk=p[off:off+rate]
        for i in range(rate//8):
            x,y=i%5,i//5
            A[x][y]^=int.from_bytes(blk[8*i:8*i+8],'little')
        A=keccak_f(A)
    out=b''
    for i in range(4):
        out+=A[i%5][i//5].to_bytes(8,'little')
    return out
assert keccak256(b'').hex()=='c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470'

P=2**256-2**32-977; N=0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141
G=(0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8)
def add(a,b):
    if a is None: return b
    if b is None: return a
    if a[0]==b[0] and (a[1]+b[1])%P==0: return None
    if a==b: l=3*a[0]*a[0]*pow(2*a[1],-1,P)%P
    else: l=(b[1]-a[1])*pow(b[0]-a[0],-1,P)%P
    x=(l*l-a[0]-b[0])%P
    return (x,(l*(a[0]-x)-a[1])%P)
def mul(k,pt):
    r=None
    while k:
        if k&1: r=add(r,pt)
        pt=add(pt,pt); k>>=1
    return r
def addr(pub): return '0x'+keccak256(pub[0].to_bytes(32,'big')+pub[1].to_bytes(32,'big'))[12:].hex()
def recover(h,r,s,v):
    x=r; y2=(pow(x,3,P)+7)%P; y=pow(y2,(P+1)//4,P)
    if (y&1)!=(v-27): y=P-y
    R=(x,y); e=int.from_bytes(h,'big'); ri=pow(r,-1,N)
    return mul(s*ri%N,R) if e==0 else add(mul(s*ri%N,R), mul((-e*ri)%N,G))

def jcs(v): return json.dumps(v,sort_keys=True,separators=(',',':'),ensure_ascii=False)

d=json.load(open(sys.argv[1]))
key=int(d['privateKey'],16)
owner=addr(mul(key,G))
print('owner from key', owner, 'file', d['owner'])
assert owner==d['owner'].lower()
for c in d['cases']:
    b=c['body']; a=c['attributes']
    types={k:v['type'] for k,v in a.items()}
    assert isinstance(b['hour'],int) and 0<=b['hour']<2**53
    assert b['exp'] in (3600,86400,604800,2592000,7776000)
    assert a['project']['type']=='str'
    if 'tag' in a: assert len(a['tag']['value'])==60 and len(base64.b64decode(a['tag']['value']))==44
    body={'v':2,'app':b['app'],'exp':b['exp'],'hour':b['hour'],'ct':b['ct'],'enc':b['enc'],'types':types,'data':b['data']}
    cb=jcs(body); ca=jcs(a)
    assert cb==c['canonicalBody'], (cb,c['canonicalBody'])
    assert ca==c['canonicalAttributes'], (ca,c['canonicalAttributes'])
    pre=b'privsvc envelope v2'+b'\x00'+cb.encode()+b'\x00'+ca.encode()
    if 'digestPreimageHex' in c: assert pre.hex()==c['digestPreimageHex']
    h=keccak256(pre)
    assert '0x'+h.hex()==c['digest'], c['name']
    sig=bytes.fromhex(c['signature'][2:]); r=int.from_bytes(sig[:32],'big'); s=int.from_bytes(sig[32:64],'big'); v=sig[64]
    assert v in (27,28) and 0<s<=N//2 and 0<r<N
    assert addr(recover(h,r,s,v))==owner, c['name']
    sealed_body=dict(body); sealed_body['sig']=c['signature']
    st=jcs(sealed_body)
    n=len(st.encode())
    size=min(x for x in (512,1024,4096,16384) if x>=n)
    assert c['sealed']==st+' '*(size-n) and c['paddedLength']==size==len(c['sealed'].encode())
    print('ok', c['name'], 'content', n, 'padded', size, 'data bytes', len(base64.b64decode(b['data'])))
print('rejects:', [r['name'] for r in d['reject']])
for r in d['reject']:
    t=r['envelope']
    # Every rejection differs from an accepted envelope; the v1 ones name version 1.
    assert t not in [c['sealed'] for c in d['cases']], r['name']
    if r['name'].startswith('version 1'): assert '"v":1' in t and '"v":2' not in t

if len(sys.argv)>2:
    w=json.load(open(sys.argv[2]))
    for c in w['hourOf']: assert c['unixSeconds']//3600==c['hour'], c
    for c in w['window']:
        nh=c['nowSeconds']//3600
        assert (max(nh-2,0)<=c['hour']<=nh+1)==c['accepted'], c
    for c in w['republish']:
        dl=(c['hour']+4)*3600
        assert c['deadline']==dl and (c['createdSeconds']<dl)==c['accepted'], c
    print('window ok:', len(w['window']), 'window cases,', len(w['republish']), 'republish cases')
