"""The searches for the default secret patterns' keywords, as `cafe._scan_keywords`
derives them from `cafe.privacy.DEFAULT_SECRET_PATTERNS` and the secret-named keys.

Written by `python -m cafe._scan_generate`; do not edit. tests/recording/test_privacy.py fails
while this is not what the patterns give."""

# (stop, expression): a line holds a keyword if, for one pair, the expression is found
# from the stop's first place in the line on. FOLDED runs on the line lower-cased.
FOLDED: tuple[tuple[bytes, bytes], ...] = (
    (b'/',
     b'/(?:\\\\/(?<=:\\\\/\\\\[\\x00-\\xff])|/(?<=:/[\\x00-\\xff]))'),
    (b'x',
     b'x(?:a(?:i\\-|\\-(?<=oxa[\\x00-\\xff]))|b\\-(?<=oxb[\\x00-\\xff])|e\\-(?<=oxe[\\x00-\\xff])|keysib'
     b'\\-[\\x30-\\x39\\x61-\\x66]|o\\-(?<=oxo[\\x00-\\xff])|p\\-(?<=oxp[\\x00-\\xff])|r\\-(?<=oxr[\\x00'
     b'-\\xff])|s\\-(?<=oxs[\\x00-\\xff]))'),
    (b'k',
     b'k(?:_(?:live_(?:(?<=rk_live[\\x00-\\xff])|(?<=sk_live[\\x00-\\xff]))|prod_(?:(?<=rk_prod[\\x00-\\'
     b'xff])|(?<=sk_prod[\\x00-\\xff]))|test_(?:(?<=rk_test[\\x00-\\xff])|(?<=sk_test[\\x00-\\xff])))|e('
     b'?:n(?:\\\\t(?<=token\\\\[\\x00-\\xff])|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5'
     b'c\\xc2-\\xf4](?<=\\-token[\\x00-\\xff])|[\\x09\\x20](?<=token[\\x00-\\xff]))|y(?:\\-[\\x30-\\x39'
     b'\\x61-\\x66]|[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=master\\-'
     b'key[\\x00-\\xff])))|\\-(?<=sk[\\x00-\\xff]))'),
    (b'.',
     b'\\.(?:atlasv1\\.|credential(?:s[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-'
     b'\\xf4]|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4])|p(?:ass[\\x0a-\\x'
     b'0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4]|wd[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25'
     b'\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4])|secret[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\'
     b'x3e\\x5c\\xc2-\\xf4]|token[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4]'
     b')'),
    (b'_',
     b'_(?:api_(?<=lin_api[\\x00-\\xff])|credential(?:s[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-'
     b'\\x3e\\x5c\\xc2-\\xf4]|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4])|k'
     b'ey[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=master_key[\\x00-\\x'
     b'ff])|p(?:ass[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4]|wd[\\x0a-\\x0'
     b'd\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4])|secret[\\x0a-\\x0d\\x1c-\\x1f\\x22'
     b'\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4]|token[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d'
     b'-\\x3e\\x5c\\xc2-\\xf4]|v1_[\\x30-\\x39\\x61-\\x66](?:(?<=doo_v1_[\\x00-\\xff])|(?<=dor_v1_[\\x00'
     b'-\\xff]))|[\\x30-\\x39](?<=ntn_[\\x00-\\xff]))'),
    (b'b',
     b'b(?:asic(?:\\\\[\\x66\\x6e\\x72\\x74]|[\\x09-\\x0d\\x1c-\\x20\\xc2-\\xf4])|earer(?:\\\\[\\x66\\x6'
     b'e\\x72\\x74]|[\\x09-\\x0d\\x1c-\\x20\\xc2-\\xf4])|scription(?:\\-key[\\x09-\\x0d\\x1c-\\x20\\x22'
     b'\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=subscription\\-key[\\x00-\\xff])|_key[\\x09-\\x0d'
     b'\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=subscription_key[\\x00-\\xff])|key'
     b'[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=subscriptionkey[\\x00-'
     b'\\xff])))'),
    (b'g',
     b'g(?:l(?:agent\\-|dt\\-|ft\\-|imt\\-|p(?:at\\-|tt\\-)|rt\\-|[\\x63\\x73])|ning(?:\\-key[\\x09-\\x0'
     b'd\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=signing\\-key[\\x00-\\xff])|_key['
     b'\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=signing_key[\\x00-\\xff'
     b']))|sk_|=(?:(?<=\\&sig[\\x00-\\xff])|(?<=\\?sig[\\x00-\\xff])))'),
    (b'y',
     b'y(?:a29\\.|s_(?<=sntrys[\\x00-\\xff])|u_(?<=sntryu[\\x00-\\xff]))'),
    (b'p',
     b'p(?:\\.(?:audit\\.(?<=dp\\.audit[\\x00-\\xff])|ct\\.(?<=dp\\.ct[\\x00-\\xff])|pt\\.(?<=dp\\.pt[\\'
     b'x00-\\xff])|s(?:a\\.(?<=dp\\.sa[\\x00-\\xff])|cim\\.(?<=dp\\.scim[\\x00-\\xff])|t\\.(?<=dp\\.st['
     b'\\x00-\\xff])))|_v1_[\\x30-\\x39\\x61-\\x66](?<=dop_v1_[\\x00-\\xff])|ass(?:\\\\t|w(?:d[\\x09-\\x'
     b'0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4]|ord[\\x09-\\x0d\\x1c-\\x20\\x22\\x2'
     b'5\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4])|[\\x09\\x20]|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a'
     b'\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=\\-pass[\\x00-\\xff]))|i(?:\\-key[\\x09-\\x0d\\x1c-\\x20\\x22\\x2'
     b'5\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=api\\-key[\\x00-\\xff])|_(?:key[\\x09-\\x0d\\x1c-\\x20'
     b'\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=api_key[\\x00-\\xff])|org_(?<=api_org[\\x00-'
     b'\\xff]))|key[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=apikey[\\x'
     b'00-\\xff])|[\\x30-\\x39\\x61-\\x66](?<=dapi[\\x00-\\xff]))|m_(?<=npm[\\x00-\\xff])|p(?:\\-(?:0\\-'
     b'(?<=app\\-0[\\x00-\\xff])|1\\-(?<=app\\-1[\\x00-\\xff])|2\\-(?<=app\\-2[\\x00-\\xff])|3\\-(?<=app'
     b'\\-3[\\x00-\\xff])|4\\-(?<=app\\-4[\\x00-\\xff])|5\\-(?<=app\\-5[\\x00-\\xff])|6\\-(?<=app\\-6[\\'
     b'x00-\\xff])|7\\-(?<=app\\-7[\\x00-\\xff])|8\\-(?<=app\\-8[\\x00-\\xff])|9\\-(?<=app\\-9[\\x00-\\x'
     b'ff]))|lx\\-)|r(?:ivate(?:\\-key[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-'
     b'\\xf4]|_key[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4])|oxy\\-authori'
     b'zation\\\\(?<="proxy\\-authorization[\\x00-\\xff]))|scale_(?:oauth_|pw_|tkn_)|ul\\-[\\x30-\\x39\\'
     b'x61-\\x66]|wd(?:\\\\t|[\\x09\\x20]|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\x'
     b'c2-\\xf4](?<=\\-pwd[\\x00-\\xff]))|\\-(?<=sq0atp[\\x00-\\xff]))'),
    (b'c',
     b'c(?:01\\.(?<=dt0c01[\\x00-\\xff])|c(?:ess(?:\\-key[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3'
     b'd-\\x3e\\x5c\\xc2-\\xf4](?<=access\\-key[\\x00-\\xff])|_key[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27'
     b'\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=access_key[\\x00-\\xff]))|ount(?:\\-key[\\x09-\\x0d\\x1c-\\x'
     b'20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=account\\-key[\\x00-\\xff])|_key[\\x09-\\x0'
     b'd\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=account_key[\\x00-\\xff])|key[\\x'
     b'09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=accountkey[\\x00-\\xff])))'
     b'|ord(?:\\.com(?:/api/webhooks/[\\x30-\\x39](?<=discord\\.com/api/webhooks/[\\x00-\\xff])|\\\\/api'
     b'\\\\/webhooks\\\\/[\\x30-\\x39](?<=discord\\.com\\\\/api\\\\/webhooks\\\\/[\\x00-\\xff]))|app\\.c'
     b'om(?:/api/webhooks/[\\x30-\\x39](?<=discordapp\\.com/api/webhooks/[\\x00-\\xff])|\\\\/api\\\\/web'
     b'hooks\\\\/[\\x30-\\x39](?<=discordapp\\.com\\\\/api\\\\/webhooks\\\\/[\\x00-\\xff])))|r(?:e(?:den'
     b'tial(?:\\\\t|s(?:\\\\t|[\\x09\\x20]|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\'
     b'xc2-\\xf4](?<=\\-credentials[\\x00-\\xff]))|[\\x09\\x20]|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\'
     b'x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=\\-credential[\\x00-\\xff]))|t(?:\\-key[\\x09-\\x0d\\x1c-\\x20'
     b'\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=secret\\-key[\\x00-\\xff])|\\\\t(?<=secret\\'
     b'\\[\\x00-\\xff])|[\\x0a-\\x0d\\x1c-\\x1f\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=\\-se'
     b'cret[\\x00-\\xff])|[\\x09\\x20\\x5f](?<=secret[\\x00-\\xff])))|yption(?:\\-key[\\x09-\\x0d\\x1c-'
     b'\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=encryption\\-key[\\x00-\\xff])|_key[\\x0'
     b'9-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=encryption_key[\\x00-\\xff]'
     b')))|sp\\-(?<=sq0csp[\\x00-\\xff]))'),
    (b'8',
     b'8_(?<=r8[\\x00-\\xff])'),
    (b'h',
     b'h(?:\\-key[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=auth\\-key['
     b'\\x00-\\xff])|_key[\\x09-\\x0d\\x1c-\\x20\\x22\\x25\\x27\\x3a\\x3d-\\x3e\\x5c\\xc2-\\xf4](?<=auth'
     b'_key[\\x00-\\xff])|f_|o(?:oks\\.slack\\.com(?:/(?:services/|triggers/|workflows/)|\\\\/(?:service'
     b's\\\\/|triggers\\\\/|workflows\\\\/))|rization(?:\\\\[\\x66\\x6e\\x72\\x74](?<=authorization\\\\['
     b'\\x00-\\xff])|[\\x09-\\x0d\\x1c-\\x20\\x22\\x3a\\x3d\\xc2-\\xf4](?<=authorization[\\x00-\\xff])|'
     b'\\\\(?<="authorization[\\x00-\\xff]))|_)|p(?:at_[\\x30-\\x39\\x61-\\x66](?<=shpat_[\\x00-\\xff])|'
     b'ca_[\\x30-\\x39\\x61-\\x66](?<=shpca_[\\x00-\\xff])|pa_[\\x30-\\x39\\x61-\\x66](?<=shppa_[\\x00-'
     b'\\xff])|ss_[\\x30-\\x39\\x61-\\x66](?<=shpss_[\\x00-\\xff])|_)|r_|s(?:ec_(?<=whsec[\\x00-\\xff])|'
     b'_)|u(?:b_pat_(?<=ithub_pat[\\x00-\\xff])|_)|v(?:b\\.|s\\.))'),
)
CASED: tuple[tuple[bytes, bytes], ...] = (
    (b'Q',
     b'Q\\~(?:(?<=0Q[\\x00-\\xff])|(?<=1Q[\\x00-\\xff])|(?<=2Q[\\x00-\\xff])|(?<=3Q[\\x00-\\xff])|(?<=4Q'
     b'[\\x00-\\xff])|(?<=5Q[\\x00-\\xff])|(?<=6Q[\\x00-\\xff])|(?<=7Q[\\x00-\\xff])|(?<=8Q[\\x00-\\xff]'
     b')|(?<=9Q[\\x00-\\xff]))'),
    (b'J',
     b'J(?:(?<=\\.eyJ)|(?<=ops_eyJ))'),
    (b'K',
     b'K[\\x30-\\x39\\x41-\\x46\\x61-\\x66](?<=SK[\\x00-\\xff])'),
    (b'G',
     b'G(?:OCSPX\\-|\\.(?<=SG[\\x00-\\xff]))'),
    (b'R',
     b'R(?:AK\\-(?<=NRAK[\\x00-\\xff])|I(?:I\\-(?<=NRII[\\x00-\\xff])|VATE\\ KEY(?:\\ BLOCK\\-\\-\\-\\-'
     b'\\-(?<=\\ PRIVATE\\ KEY\\ BLOCK\\-\\-\\-\\-[\\x00-\\xff])|\\-\\-\\-\\-\\-(?<=\\ PRIVATE\\ KEY\\-'
     b'\\-\\-\\-[\\x00-\\xff])))|JS\\-(?<=NRJS[\\x00-\\xff]))'),
    (b'A',
     b'A(?:3T[\\x30-\\x39\\x41-\\x5a]|BIA|CCA|Iza|K(?:\\-[\\x30-\\x39\\x61-\\x66](?<=PMAK\\-[\\x00-\\xff'
     b'])|IA)|SIA|TATT3|gE(?<=pypi\\-Ag[\\x00-\\xff])|I(?<=LTA[\\x00-\\xff]))'),
)
