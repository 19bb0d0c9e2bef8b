; Netplay libretro host: NES test program (NROM-128, 16 KB PRG, 8 KB CHR RAM).
;
; Built at test time with ca65/ld65 (see netplay_test.cfg); no ROM is committed.
;
; After reset the program clears RAM, waits for the PPU, then turns on NMI and rendering and
; idles. Every NMI (once per video frame) it reads both controllers and folds them into a state
; block in RAM, so that one wrong input on one frame, or a rollback that restores the wrong
; state, changes the RAM from that frame on:
;
;   $0300-$0301  "NP" once initialised
;   $0302-$0303  FRAMES: NMIs handled so far (16-bit, little-endian)
;   $0304        PAD0: controller 1 this frame, bit 7..0 = A B Select Start Up Down Left Right
;   $0305        PAD1: controller 2, same layout
;   $0306-$0309  HASH: 32-bit mix of every pad byte so far (a bijection of the old hash for
;                given pads, so a difference never cancels on the next frame)
;   $030A-$030B  X position of player 1, player 2 (+1 per frame on Right, -1 on Left)
;   $030C-$030D  Y position of player 1, player 2 (+1 per frame on Down, -1 on Up)
;   $030E-$030F  frames with A held, low bytes (player 1, player 2)
;   $0310-$0311  frames with A held, high bytes
;   $0312-$0313  frames with B held (8-bit)
;   $0400-$04FF  PAD0 of the frame whose FRAMES value (before the increment) is the offset, mod 256
;   $0500-$05FF  PAD1, likewise
;   $0200-$02FF  sprite page (two sprites at the players' positions), copied by OAM DMA each NMI

PPUCTRL   = $2000
PPUMASK   = $2001
PPUSTATUS = $2002
OAMADDR   = $2003
OAMDMA    = $4014
JOY1      = $4016
JOY2      = $4017
APUFRAME  = $4017
DMCFREQ   = $4010

OAM       = $0200
STATE     = $0300
MAGIC     = STATE + 0
FRAMES    = STATE + 2
PAD0      = STATE + 4
PAD1      = STATE + 5
HASH      = STATE + 6
XPOS      = STATE + 10
YPOS      = STATE + 12
APRESSLO  = STATE + 14
APRESSHI  = STATE + 16
BPRESS    = STATE + 18
PADTEMP   = STATE + 20
HISTORY0  = $0400
HISTORY1  = $0500

BUTTON_A      = $80
BUTTON_B      = $40
BUTTON_UP     = $08
BUTTON_DOWN   = $04
BUTTON_LEFT   = $02
BUTTON_RIGHT  = $01

.segment "HEADER"
    .byte "NES", $1A
    .byte 1                 ; 1 x 16 KB PRG ROM
    .byte 0                 ; no CHR ROM: 8 KB CHR RAM
    .byte $01               ; mapper 0, vertical mirroring
    .byte $00
    .res 8, $00

.segment "CODE"

reset:
    sei
    cld
    ldx #$40
    stx APUFRAME            ; no APU frame IRQ
    ldx #$FF
    txs
    inx                     ; X = 0
    stx PPUCTRL             ; no NMI yet
    stx PPUMASK             ; rendering off
    stx DMCFREQ             ; no DMC IRQ
    bit PPUSTATUS           ; clear the vblank flag
@vblank1:
    bit PPUSTATUS
    bpl @vblank1

    ldx #0
@clear:
    lda #$00
    sta $0000, x
    sta $0100, x
    sta $0300, x
    sta $0400, x
    sta $0500, x
    sta $0600, x
    sta $0700, x
    lda #$FF                ; sprites off screen
    sta OAM, x
    inx
    bne @clear

@vblank2:
    bit PPUSTATUS
    bpl @vblank2

    lda #'N'
    sta MAGIC
    lda #'P'
    sta MAGIC + 1
    lda #128
    sta XPOS
    sta XPOS + 1
    lda #120
    sta YPOS
    sta YPOS + 1
    lda #$67                ; hash seed $01234567
    sta HASH
    lda #$45
    sta HASH + 1
    lda #$23
    sta HASH + 2
    lda #$01
    sta HASH + 3
    lda #0                  ; sprites 0 and 1: tile 0, palette 0 / 1
    sta OAM + 1
    sta OAM + 2
    sta OAM + 5
    lda #1
    sta OAM + 6

    lda #%10000000          ; NMI on
    sta PPUCTRL
    lda #%00011110          ; background and sprites on, left column too
    sta PPUMASK
idle:
    jmp idle

nmi:
    pha
    txa
    pha
    tya
    pha

    lda #0
    sta OAMADDR
    lda #>OAM
    sta OAMDMA

    jsr read_pads
    jsr fold

    inc FRAMES
    bne @done
    inc FRAMES + 1
@done:
    pla
    tay
    pla
    tax
    pla
irq:
    rti

; Strobes both controllers and shifts in 8 buttons each: A first, so A ends in bit 7.
read_pads:
    ldx #1
    stx JOY1
    dex
    stx JOY1
    ldx #8
@bit:
    lda JOY1
    lsr a
    rol PAD0
    lda JOY2
    lsr a
    rol PAD1
    dex
    bne @bit
    rts

; Folds this frame's pads into the history, the hash and each player's position and counters.
fold:
    ldx FRAMES
    lda PAD0
    sta HISTORY0, x
    lda PAD1
    sta HISTORY1, x

    ldy #3                  ; HASH = rotate-left-3(HASH)
@rotate:
    lda HASH + 3
    asl a
    rol HASH
    rol HASH + 1
    rol HASH + 2
    rol HASH + 3
    dey
    bne @rotate
    lda HASH                ; then mix in both pads and the frame number
    eor PAD0
    sta HASH
    lda HASH + 1
    eor PAD1
    sta HASH + 1
    clc
    lda HASH + 2
    adc FRAMES
    sta HASH + 2
    lda HASH + 3
    eor HASH
    sta HASH + 3

    ldx #0
    lda PAD0
    jsr move
    ldx #1
    lda PAD1
    jsr move

    lda YPOS                ; sprites follow the players
    sta OAM + 0
    lda XPOS
    sta OAM + 3
    lda YPOS + 1
    sta OAM + 4
    lda XPOS + 1
    sta OAM + 7
    rts

; A = pad bits, X = player: moves the player and counts held buttons.
move:
    sta PADTEMP
    and #BUTTON_RIGHT
    beq @notRight
    inc XPOS, x
@notRight:
    lda PADTEMP
    and #BUTTON_LEFT
    beq @notLeft
    dec XPOS, x
@notLeft:
    lda PADTEMP
    and #BUTTON_DOWN
    beq @notDown
    inc YPOS, x
@notDown:
    lda PADTEMP
    and #BUTTON_UP
    beq @notUp
    dec YPOS, x
@notUp:
    lda PADTEMP
    and #BUTTON_A
    beq @notA
    inc APRESSLO, x
    bne @notA
    inc APRESSHI, x
@notA:
    lda PADTEMP
    and #BUTTON_B
    beq @notB
    inc BPRESS, x
@notB:
    rts

.segment "VECTORS"
    .word nmi
    .word reset
    .word irq
